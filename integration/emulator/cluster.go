package emulator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// ClusterNodes is the number of servers of a distributed MinIO.
const ClusterNodes = 4

// Cluster is a distributed MinIO: ClusterNodes server processes on
// 127.0.0.1, each with one drive of its own, which MinIO makes one erasure
// set of 4 drives (2 data, 2 parity, its default for 4 drives). It keeps
// serving reads with 2 nodes down and writes with 1. S3 reaches the
// cluster through node 0; Node(i) through node i. It has no image: it runs
// as local processes in container mode too.
type Cluster struct {
	S3
	Nodes []*Process
}

// Node is the cluster's bucket reached through node i.
func (c *Cluster) Node(i int) *S3 {
	s := c.S3
	s.Endpoint = "http://" + hostPort(c.Nodes[i].Port())
	return &s
}

// WaitHealthy waits until every running node says the cluster has write
// quorum (MinIO's /minio/health/cluster answers 200), as after a node was
// resumed or restarted.
func (c *Cluster) WaitHealthy(t testing.TB) {
	t.Helper()
	if err := c.waitHealthy(readyTimeout); err != nil {
		t.Fatal(err)
	}
}

func (c *Cluster) waitHealthy(bound time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for _, p := range c.Nodes {
		if p.Pid() == 0 {
			continue
		}
		url := fmt.Sprintf("http://%s/minio/health/cluster", hostPort(p.Port()))
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				err = errors.New(resp.Status)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: no write quorum within %v (last: %v)\n%s log:\n%s", url, bound, err, p.Name(), p.Log())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// stopForGood stops every node, removes it and gives its ports back.
func (c *Cluster) stopForGood() {
	var wg sync.WaitGroup
	for _, p := range c.Nodes {
		wg.Go(p.stopForGood)
	}
	wg.Wait()
}

// MinIOCluster returns the distributed MinIO shared by every test in the
// test binary, starting it on first use. Tests that pause or stop a node
// start their own with StartMinIOCluster.
func MinIOCluster(t testing.TB) *Cluster {
	t.Helper()
	return sharedCluster.get(t, func(dir string) (*Cluster, *Process, error) {
		c, err := startMinIOCluster(dir, nil)
		return c, nil, err
	})
}

// StartMinIOCluster starts a distributed MinIO for the calling test alone,
// to pause, stop or restart its nodes at will; env is added to every
// node's environment (MINIO_DRIVE_MAX_TIMEOUT=5s, say). It is stopped when
// the test ends.
func StartMinIOCluster(t testing.TB, env ...string) *Cluster {
	t.Helper()
	c, err := startMinIOCluster(t.TempDir(), env)
	check(t, err)
	// Also after a panic in the test: cleanups run before the test binary
	// dies.
	t.Cleanup(c.stopForGood)
	return c
}

var sharedCluster shared[Cluster]

// startMinIOCluster starts the nodes with their drives under dir, waits
// until each answers and the cluster has write quorum, and creates the
// bucket. If a node exits before it answers (another process won one of
// its ports), every node starts over on fresh ports.
func startMinIOCluster(dir string, env []string) (*Cluster, error) {
	var err error
	for range bindAttempts {
		var c *Cluster
		if c, err = tryCluster(dir, env); err == nil {
			return c, nil
		}
		if !errors.Is(err, errExited) {
			return nil, err
		}
	}
	return nil, err
}

func tryCluster(dir string, env []string) (*Cluster, error) {
	var ports, consoles []int
	release := func() {
		for _, port := range slices.Concat(ports, consoles) {
			releasePort(port)
		}
	}
	for range ClusterNodes {
		for _, list := range []*[]int{&ports, &consoles} {
			port, err := reservePort()
			if err != nil {
				release()
				return nil, fmt.Errorf("minio cluster: %w", err)
			}
			*list = append(*list, port)
		}
	}
	// Every node is given every drive, its own and the others', as
	// http://HOST:PORT/PATH; the path of a drive differs per node, as MinIO
	// wants on one host.
	var drives []string
	for i, port := range ports {
		drive := filepath.Join(dir, fmt.Sprintf("node%d", i+1), "drive1")
		if err := os.MkdirAll(drive, 0o755); err != nil {
			release()
			return nil, err
		}
		drives = append(drives, "http://"+hostPort(port)+drive)
	}
	c := &Cluster{}
	for i := range ClusterNodes {
		console := consoles[i]
		p, err := newProcess(program{
			name: fmt.Sprintf("minio-node%d", i+1), bin: "bin/minio", health: "/minio/health/live", want200: true,
			env: slices.Concat(minioEnv, []string{
				// In a container (MinIO looks for /.dockerenv) MinIO waits for
				// a loopback host to resolve to another address, for ever,
				// unless it is told which host:port is this node.
				"_MINIO_SERVER_LOCAL=" + hostPort(ports[i]),
			}, env),
			args: func(port int, _ string) []string {
				return append([]string{"server", "--quiet", "--address", hostPort(port), "--console-address", hostPort(console)}, drives...)
			},
		}, filepath.Join(dir, fmt.Sprintf("node%d", i+1)))
		if err != nil {
			release()
			return nil, err
		}
		p.port = ports[i]
		c.Nodes = append(c.Nodes, p)
	}
	fail := func(err error) (*Cluster, error) {
		for _, p := range c.Nodes {
			p.Stop()
			p.r.remove()
		}
		release()
		return nil, err
	}
	// All at once: a node waits for the others before it serves S3.
	dones := make([]<-chan struct{}, len(c.Nodes))
	for i, p := range c.Nodes {
		done, err := p.begin()
		if err != nil {
			return fail(err)
		}
		dones[i] = done
	}
	for i, p := range c.Nodes {
		if err := p.awaitReady(dones[i]); err != nil {
			return fail(err)
		}
	}
	if err := c.waitHealthy(readyTimeout); err != nil {
		return fail(err)
	}
	for _, p := range c.Nodes {
		track(p)
	}
	c.S3 = S3{Endpoint: "http://" + hostPort(ports[0]), Region: "us-east-1",
		AccessKey: minioAccessKey, SecretKey: minioSecretKey, Bucket: bucketName}
	if err := createS3Bucket(&c.S3); err != nil {
		c.stopForGood()
		return nil, fmt.Errorf("minio cluster: %w\nminio-node1 log:\n%s", err, c.Nodes[0].Log())
	}
	return c, nil
}
