package emulator

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// setupTimeout bounds creating a bucket on a fresh emulator.
const setupTimeout = 30 * time.Second

// program is how to run one emulator, as a local process or a container.
type program struct {
	name    string
	bin     string // path under the emulators directory
	image   string // "" if it has none: always a local process
	env     []string
	health  string // URL path polled for readiness
	want200 bool   // health must answer 200, not just any status
	// args is the command line for port, keeping data under dataDir.
	args func(port int, dataDir string) []string
	// ctrDir is dataDir inside the container; the image has it.
	ctrDir string
	// ctrCmd goes before args in the container's command, for an image
	// whose entrypoint does not run the emulator.
	ctrCmd []string
	// ready bounds the wait for its first answer; 0: readyTimeout.
	ready time.Duration
}

// launch starts prog on a fresh port: in container mode as a container of
// its image, else as a local process keeping its data under dir.
func launch(prog program, dir string) (*Process, error) {
	p, err := newProcess(prog, dir)
	if err != nil {
		return nil, err
	}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// newProcess is prog, keeping its data under dir, ready to be started.
func newProcess(prog program, dir string) (*Process, error) {
	p := &Process{name: prog.name, health: prog.health, want200: prog.want200, ready: cmp.Or(prog.ready, readyTimeout)}
	docker := false
	if prog.image != "" {
		var err error
		if docker, err = useDocker(); err != nil {
			return nil, err
		}
	}
	if docker {
		p.r = newCtrRunner(prog.name, prog.image, prog.env, &p.log)
		p.argsFor = func(port int) []string { return append(slices.Clone(prog.ctrCmd), prog.args(port, prog.ctrDir)...) }
	} else {
		bin, err := binary(prog.name, prog.bin)
		if err != nil {
			return nil, err
		}
		p.dir = dir
		p.r = &procRunner{name: prog.name, bin: bin, dir: dir, env: prog.env, log: &p.log}
		p.argsFor = func(port int) []string { return prog.args(port, dir) }
	}
	return p, nil
}

// startVGW runs versitygw with its posix backend rooted at dir; buckets are
// directories there, so they survive a restart.
func startVGW(dir string) (*S3, *Process, error) {
	return startS3(program{
		name: "versitygw", bin: "bin/versitygw", image: versityGWImage, health: "/",
		env: []string{"ROOT_ACCESS_KEY_ID=" + vgwAccessKey, "ROOT_SECRET_ACCESS_KEY=" + vgwSecretKey},
		args: func(port int, dataDir string) []string {
			// Without --keep-alive every reply says Connection: close.
			return []string{"--port", hostPort(port), "--keep-alive", "--quiet", "posix", dataDir}
		},
		ctrDir: "/tmp/vgw",
	}, dir, vgwAccessKey, vgwSecretKey)
}

// startVGWVersioned runs versitygw as startVGW does, with bucket
// versioning, which its posix backend offers only with a directory for
// the versions (--versioning-dir). It has no image: it runs as a local
// process in container mode too, with its buckets under dir/root.
func startVGWVersioned(dir string) (*S3, *Process, error) {
	for _, d := range []string{"root", "versions"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, nil, err
		}
	}
	return startS3(program{
		name: "versitygw-versioned", bin: "bin/versitygw", health: "/",
		env: []string{"ROOT_ACCESS_KEY_ID=" + vgwAccessKey, "ROOT_SECRET_ACCESS_KEY=" + vgwSecretKey},
		args: func(port int, dataDir string) []string {
			return []string{"--port", hostPort(port), "--keep-alive", "--quiet", "posix",
				"--versioning-dir", filepath.Join(dataDir, "versions"), filepath.Join(dataDir, "root")}
		},
	}, dir, vgwAccessKey, vgwSecretKey)
}

// minioEnv is every MinIO server's environment: the root credentials, and
// no update checks or telemetry (the machine may have no network).
var minioEnv = []string{"MINIO_ROOT_USER=" + minioAccessKey, "MINIO_ROOT_PASSWORD=" + minioSecretKey,
	"MINIO_UPDATE=off", "MINIO_BROWSER=off", "MINIO_CI_CD=1"}

// startMinIO runs a single-drive MinIO server with its data under dir;
// the console listens on a second free port, which MinIO insists on. The
// bucket is created with the S3 API, as on any S3 store.
func startMinIO(dir string) (*S3, *Process, error) {
	return startS3(program{
		name: "minio", bin: "bin/minio", image: minioImage, health: "/minio/health/live", want200: true,
		env: minioEnv,
		args: func(port int, dataDir string) []string {
			// MinIO binds a console port even with the browser off: the
			// next port up, which a clash makes the start retry elsewhere.
			return []string{"server", "--quiet", "--address", hostPort(port), "--console-address", hostPort(port + 1), dataDir}
		},
		ctrDir: "/data",
	}, dir, minioAccessKey, minioSecretKey)
}

// startCephRGW runs a single-host Ceph cluster whose radosgw serves S3
// (scripts/ceph-rgw.sh, installed from Debian's packages by
// install-emulators.sh). It has no image: it runs as a local process in
// both modes. It takes some 20 s to come up on 2 idle cores.
func startCephRGW(dir string) (*S3, *Process, error) {
	return startS3(program{
		name: "ceph-rgw", bin: "bin/ceph-rgw", health: "/",
		args: func(port int, dataDir string) []string {
			return []string{strconv.Itoa(port), dataDir}
		},
		ready: 4 * time.Minute,
	}, dir, cephAccessKey, cephSecretKey)
}

// startS3 launches prog, an S3 server that takes the keys accessKey and
// secretKey, with its data under dir, and creates the bucket with the S3
// API, as on any S3 store.
func startS3(prog program, dir, accessKey, secretKey string) (*S3, *Process, error) {
	p, err := launch(prog, dir)
	if err != nil {
		return nil, nil, err
	}
	s := &S3{Endpoint: "http://" + hostPort(p.port), Region: "us-east-1",
		AccessKey: accessKey, SecretKey: secretKey, Bucket: bucketName}
	if err := createS3Bucket(s); err != nil {
		p.stopForGood()
		return nil, nil, fmt.Errorf("%s: %w\n%s log:\n%s", prog.name, err, prog.name, p.Log())
	}
	return s, p, nil
}

// startS3rver runs s3rver, which creates the bucket itself at startup.
func startS3rver(dir string) (*S3, *Process, error) {
	p, err := launch(program{
		name: "s3rver", bin: "node_modules/.bin/s3rver", health: "/",
		args: func(port int, dataDir string) []string {
			return []string{"-d", dataDir, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "--silent",
				"--configure-bucket", bucketName}
		},
	}, dir)
	if err != nil {
		return nil, nil, err
	}
	return &S3{Endpoint: "http://" + hostPort(p.port), Region: "us-east-1",
		AccessKey: s3rverKey, SecretKey: s3rverKey, Bucket: bucketName}, p, nil
}

// startFakeGCS runs fake-gcs-server, keeping objects in memory or, if
// onDisk, under dir.
func startFakeGCS(dir string, onDisk bool) (*GCS, *Process, error) {
	p, err := launch(program{
		name: "fake-gcs-server", bin: "bin/fake-gcs-server", image: fakeGCSImage,
		health: "/_internal/healthcheck", want200: true,
		args: func(port int, dataDir string) []string {
			args := []string{"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port),
				// Without -public-host, reads through the XML API answer 404.
				"-public-host", hostPort(port), "-external-url", "http://" + hostPort(port),
				"-log-level", "warn"}
			if onDisk {
				return append(args, "-backend", "filesystem", "-filesystem-root", path.Join(dataDir, "storage"))
			}
			return append(args, "-backend", "memory")
		},
		ctrDir: "/tmp",
	}, dir)
	if err != nil {
		return nil, nil, err
	}
	g := &GCS{Endpoint: "http://" + hostPort(p.port) + "/storage/v1/", Host: hostPort(p.port), Bucket: bucketName}
	if err := createGCSBucket(g); err != nil {
		p.stopForGood()
		return nil, nil, fmt.Errorf("fake-gcs-server: %w\nfake-gcs-server log:\n%s", err, p.Log())
	}
	return g, p, nil
}

// startAzurite runs Azurite's blob service, keeping blobs in memory or, if
// onDisk, under dir.
func startAzurite(dir string, onDisk bool) (*Azure, *Process, error) {
	p, err := launch(program{
		name: "azurite", bin: "node_modules/.bin/azurite-blob", image: azuriteImage, health: "/",
		args: func(port int, dataDir string) []string {
			// The Azure SDK sends an x-ms-version newer than Azurite knows;
			// without --skipApiVersionCheck every request is refused.
			args := []string{"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port),
				"--skipApiVersionCheck", "--disableTelemetry", "--silent"}
			if onDisk {
				return append(args, "--location", dataDir)
			}
			return append(args, "--inMemoryPersistence")
		},
		// The image's volume: removed with the container.
		ctrDir: "/data",
		// The image has no entrypoint; azurite-blob is on its PATH.
		ctrCmd: []string{"azurite-blob"},
	}, dir)
	if err != nil {
		return nil, nil, err
	}
	a := azureAt(hostPort(p.port))
	if err := createContainer(a); err != nil {
		p.stopForGood()
		return nil, nil, fmt.Errorf("azurite: %w\nazurite log:\n%s", err, p.Log())
	}
	return a, p, nil
}

func azureAt(hostPort string) *Azure {
	endpoint := "http://" + hostPort + "/" + azuriteAccount
	return &Azure{
		ConnectionString: "DefaultEndpointsProtocol=http;AccountName=" + azuriteAccount +
			";AccountKey=" + azuriteKey + ";BlobEndpoint=" + endpoint + ";",
		Endpoint:  endpoint,
		Container: containerName,
	}
}

func hostPort(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func createS3Bucket(s *S3) error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	client := s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
	for {
		_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)})
		if err == nil {
			return nil
		}
		// A fresh Ceph cluster times out (408) while it creates the
		// bucket's pools: the next attempt finds them.
		if ctx.Err() != nil || !strings.Contains(err.Error(), "RequestTimeout") {
			return fmt.Errorf("create bucket %q at %s: %w", s.Bucket, s.Endpoint, err)
		}
		time.Sleep(time.Second)
	}
}

// createGCSBucket uses the JSON API directly: one POST, no client to set up.
func createGCSBucket(g *GCS) error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	url := g.Endpoint + "b?project=objlease"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"name":"`+g.Bucket+`"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("create bucket %q at %s: %w", g.Bucket, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("create bucket %q at %s: %s: %s", g.Bucket, url, resp.Status, body)
	}
	return nil
}

func createContainer(a *Azure) error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	client, err := azblob.NewClientFromConnectionString(a.ConnectionString, nil)
	if err != nil {
		return fmt.Errorf("azure client for %s: %w", a.Endpoint, err)
	}
	if _, err := client.CreateContainer(ctx, a.Container, nil); err != nil {
		return fmt.Errorf("create container %q at %s: %w", a.Container, a.Endpoint, err)
	}
	return nil
}
