package emulator

// Container mode: with OBJLEASE_EMULATORS=docker and a Docker engine that
// answers, the shared VersityGW, FakeGCS and Azurite instances run as
// containers of the same pinned versions. s3rver has no official image and
// the private Start* instances need signals (Pause, Stop, Restart on the same
// port), so those stay local processes.
//
// This mode compiles but has not been run against a Docker engine: the
// machines it was written on have none. Treat a failure here as a bug in
// this file first.

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Pinned images: the same versions scripts/install-emulators.sh installs.
const (
	versityGWImage = "versity/versitygw:v1.8.0"
	fakeGCSImage   = "fsouza/fake-gcs-server:1.56.1"
	azuriteImage   = "mcr.microsoft.com/azure-storage/azurite:3.37.0"
)

var (
	dockerOnce sync.Once
	dockerOK   bool
	dockerWhy  string // why container mode is off although asked for

	containersMu sync.Mutex
	containers   []testcontainers.Container
)

// useDocker reports whether container mode is on. The second result, if
// not empty, says why containers were asked for but are not used.
func useDocker() (bool, string) {
	if os.Getenv("OBJLEASE_EMULATORS") != "docker" {
		return false, ""
	}
	dockerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cli, err := testcontainers.NewDockerClientWithOpts(ctx) // fails unless the engine answers
		if err != nil {
			dockerWhy = fmt.Sprintf("OBJLEASE_EMULATORS=docker but no Docker engine answers (%v); using local processes", err)
			return
		}
		cli.Close()
		dockerOK = true
	})
	return dockerOK, dockerWhy
}

// runContainer starts image with containerPort published on 127.0.0.1:hostPort
// and waits for it with ready.
func runContainer(image string, containerPort string, hostPort int, env map[string]string, cmd []string, ready wait.Strategy) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // includes pulling the image
	defer cancel()
	port := network.MustParsePort(containerPort)
	c, err := testcontainers.Run(ctx, image,
		testcontainers.WithExposedPorts(containerPort),
		testcontainers.WithEnv(env),
		testcontainers.WithCmd(cmd...),
		// A fixed host port, known before start: fake-gcs-server must be
		// told the address clients use to reach it.
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(hostPort)}}}
		}),
		testcontainers.WithWaitStrategyAndDeadline(readyTimeout, ready),
	)
	if c != nil {
		containersMu.Lock()
		containers = append(containers, c)
		containersMu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("container %s: %w", image, err)
	}
	return nil
}

func anyStatus(int) bool { return true }

func vgwContainer() (*S3, error) {
	port, err := reservePort()
	if err != nil {
		return nil, err
	}
	err = runContainer(versityGWImage, "7070/tcp", port,
		map[string]string{"ROOT_ACCESS_KEY_ID": vgwAccessKey, "ROOT_SECRET_ACCESS_KEY": vgwSecretKey},
		[]string{"--port", ":7070", "--keep-alive", "--quiet", "posix", "/tmp"},
		wait.ForHTTP("/").WithPort("7070/tcp").WithStatusCodeMatcher(anyStatus))
	if err != nil {
		return nil, err
	}
	s := &S3{Endpoint: "http://" + hostPort(port), Region: "us-east-1",
		AccessKey: vgwAccessKey, SecretKey: vgwSecretKey, Bucket: bucketName}
	return s, createS3Bucket(s)
}

func fakeGCSContainer() (*GCS, error) {
	port, err := reservePort()
	if err != nil {
		return nil, err
	}
	err = runContainer(fakeGCSImage, "4443/tcp", port, nil,
		[]string{"-scheme", "http", "-host", "0.0.0.0", "-port", "4443", "-backend", "memory",
			"-public-host", hostPort(port), "-external-url", "http://" + hostPort(port), "-log-level", "warn"},
		wait.ForHTTP("/_internal/healthcheck").WithPort("4443/tcp"))
	if err != nil {
		return nil, err
	}
	g := &GCS{Endpoint: "http://" + hostPort(port) + "/storage/v1/", Host: hostPort(port), Bucket: bucketName}
	return g, createGCSBucket(g)
}

func azuriteContainer() (*Azure, error) {
	port, err := reservePort()
	if err != nil {
		return nil, err
	}
	err = runContainer(azuriteImage, "10000/tcp", port, nil,
		[]string{"azurite-blob", "--blobHost", "0.0.0.0", "--blobPort", "10000", "--inMemoryPersistence",
			"--skipApiVersionCheck", "--disableTelemetry", "--silent"},
		wait.ForHTTP("/").WithPort("10000/tcp").WithStatusCodeMatcher(anyStatus))
	if err != nil {
		return nil, err
	}
	a := azureAt(hostPort(port))
	return a, createContainer(a)
}

// stopDocker removes every container started (testcontainers' reaper
// would also do so once the test binary is gone).
func stopDocker() {
	containersMu.Lock()
	cs := containers
	containers = nil
	containersMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range cs {
		_ = c.Terminate(ctx)
	}
}
