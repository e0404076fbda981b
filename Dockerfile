# The objlease image: the static CLI as the entrypoint, a non-root user,
# CA certificates, and nothing else (no shell, no package manager).
#
# scripts/image.sh builds it: it takes the linux binary of the release
# archive for this machine (scripts/release.sh), lays out rootfs/ beside
# this file and runs docker build, which needs no registry (FROM scratch).
#
#   docker run --rm objlease/objlease:v0.1.0 version
#   docker run -e AWS_ACCESS_KEY_ID -e AWS_SECRET_ACCESS_KEY \
#     objlease/objlease:v0.1.0 run s3://bucket/jobs/nightly -- /job
#
# As PID 1 objlease handles SIGTERM (docker stop) as it does anywhere:
# run, elect and group join pass it to the command and release the lease
# once the command has exited. The command runs under a supervisor that is
# a child subreaper, so what the command leaves behind is reaped there.
FROM scratch
COPY rootfs/ /
USER 65532:65532
WORKDIR /home/objlease
ENV HOME=/home/objlease
ENTRYPOINT ["/usr/local/bin/objlease"]
