// Package kubernetes holds manifests that run objlease in Kubernetes; its
// test decodes each strictly against the Kubernetes API types (no field
// unknown to them, none misspelt) and checks that its objlease command
// line is one the CLI accepts. No cluster runs them here.
package kubernetes

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func TestManifestsDecodeStrictly(t *testing.T) {
	cases := map[string]func([]byte) (*corev1.PodSpec, error){
		"cronjob-run.yaml": func(b []byte) (*corev1.PodSpec, error) {
			var o batchv1.CronJob
			err := yaml.UnmarshalStrict(b, &o)
			return &o.Spec.JobTemplate.Spec.Template.Spec, err
		},
		"deployment-elect.yaml": func(b []byte) (*corev1.PodSpec, error) {
			var o appsv1.Deployment
			err := yaml.UnmarshalStrict(b, &o)
			return &o.Spec.Template.Spec, err
		},
		"indexed-job-group.yaml": func(b []byte) (*corev1.PodSpec, error) {
			var o batchv1.Job
			err := yaml.UnmarshalStrict(b, &o)
			return &o.Spec.Template.Spec, err
		},
	}
	files, _ := filepath.Glob("*.yaml")
	if len(files) != len(cases) {
		t.Errorf("manifests %v, want the %d this test knows", files, len(cases))
	}
	cli := buildCLI(t)
	for name, decode := range cases {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := decode(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		c := spec.Containers[0]
		if len(c.Command) != 1 || c.Command[0] != "/usr/local/bin/objlease" {
			t.Errorf("%s: command %q, want the image's objlease", name, c.Command)
			continue
		}
		checkArgs(t, cli, name, c.Args)
		checkTmp(t, name, spec)
	}
}

// checkTmp checks that a container with a read-only root has a writable
// /tmp: objlease put copies a pipe there before it sends it, and a
// command finds no $TMPDIR otherwise.
func checkTmp(t *testing.T, name string, spec *corev1.PodSpec) {
	t.Helper()
	for _, c := range spec.Containers {
		if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			continue
		}
		writable := false
		for _, m := range c.VolumeMounts {
			if m.MountPath != "/tmp" || m.ReadOnly {
				continue
			}
			for _, v := range spec.Volumes {
				if v.Name == m.Name && v.EmptyDir != nil {
					writable = true
				}
			}
		}
		if !writable {
			t.Errorf("%s: container %q has a read-only root and no emptyDir at /tmp: objlease put of a pipe, and the command, find no temporary directory", name, c.Name)
		}
	}
}

// checkArgs has the CLI parse args with -h added: a flag it does not
// take, or a misplaced one, is a usage error (exit 64), help exits 0.
func checkArgs(t *testing.T, cli, name string, args []string) {
	t.Helper()
	var cmd []string
	for _, a := range args {
		if a == "--" {
			break
		}
		// $(VAR) is Kubernetes' own expansion.
		cmd = append(cmd, strings.NewReplacer("$(POD_NAME)", "pod-0", "$(POD_IP)", "10.0.0.1", "$(JOB_COMPLETION_INDEX)", "0").Replace(a))
	}
	out, err := exec.Command(cli, append(cmd, "-h")...).CombinedOutput()
	if err != nil {
		t.Errorf("%s: objlease %s -h: %v\n%s", name, strings.Join(cmd, " "), err, out)
	}
}

func buildCLI(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "objlease")
	// From the root module, with its own go.sum: this module requires
	// only what the examples import.
	build := exec.Command("go", "build", "-o", bin, "./cmd/objlease")
	build.Dir = filepath.Join("..", "..")
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("building the CLI: %v\n%s", err, out)
	}
	return bin
}
