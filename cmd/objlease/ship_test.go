package main

import (
	"os/exec"
	"strings"
	"testing"
)

// unsafeOnly are the packages that exist only for tests built with
// -tags objlease_unsafe: switches that turn the protocol's safety measures
// off. No package of a normal build may depend on them.
var unsafeOnly = []string{
	"github.com/objlease/objlease/internal/safeguards",
}

// TestNothingUnsafeShips lists the dependencies of the CLI and of every
// package of the module, as a normal build compiles them, and fails if the
// safety switches are among them.
func TestNothingUnsafeShips(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the build's packages: %v", err)
	}
	for _, pattern := range []string{".", "github.com/objlease/objlease/..."} {
		out, err := exec.Command(goBin, "list", "-deps", pattern).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pattern, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed only %q", pattern, deps)
		}
		for _, d := range deps {
			for _, bad := range unsafeOnly {
				if d == bad {
					t.Errorf("go list -deps %s includes %s: the safety switches are in a normal build", pattern, d)
				}
			}
		}
	}
}

// Each cloud store can be left out of a build with its tag, and its SDK
// with it; a URL of a store left out says so.
func TestStoresCanBeLeftOut(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the build's packages: %v", err)
	}
	for tag, sdk := range map[string]string{
		"objlease_no_gcs":    "cloud.google.com/go/storage",
		"objlease_no_azblob": "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob",
		"objlease_no_s3":     "github.com/aws/aws-sdk-go-v2/service/s3",
	} {
		out, err := exec.Command(goBin, "list", "-deps", "-tags", tag, ".").Output()
		if err != nil {
			t.Fatalf("go list -deps -tags %s: %v", tag, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps -tags %s listed only %q", tag, deps)
		}
		for _, d := range deps {
			if d == sdk {
				t.Errorf("built with -tags %s, the CLI still has %s", tag, sdk)
			}
		}
	}
}

// TestLibraryLinksNoExporter: the OpenTelemetry SDK and its exporters
// (OTLP, Prometheus) are the CLI's; a program that imports the library, a
// store or the test suites records through the API only and links none of
// them.
func TestLibraryLinksNoExporter(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the build's packages: %v", err)
	}
	args := []string{"list", "-deps", "github.com/objlease/objlease/objlease/...", "github.com/objlease/objlease/providers",
		"github.com/objlease/objlease/providers/file", "github.com/objlease/objlease/providers/s3store"}
	out, err := exec.Command(goBin, args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, d := range deps {
		for _, bad := range []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters/", "go.opentelemetry.io/proto/otlp", "github.com/prometheus/"} {
			if strings.HasPrefix(d, bad) {
				t.Errorf("the library links %s", d)
			}
		}
	}
	if !strings.Contains(string(out), "go.opentelemetry.io/otel/metric\n") {
		t.Error("the library does not record through go.opentelemetry.io/otel/metric: is the list right?")
	}
}
