package check

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"testing"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

var update = flag.Bool("update", false, "rewrite the generated files of deploy/ (seccomp profile)")

// TestSeccompProfile: deploy/seccomp/fanoutd.json is Docker's default
// profile plus the io_uring calls, byte for byte what SeccompProfile
// writes (go test -update rewrites it); Docker's own loader accepts it, and
// the filter it makes allows io_uring_setup, _enter and _register
// unconditionally while the default's refusals (reboot, mount, module
// loading without the capability) stay refused.
func TestSeccompProfile(t *testing.T) {
	want, err := SeccompProfile()
	if err != nil {
		t.Fatal(err)
	}
	const path = "../seccomp/fanoutd.json"
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what SeccompProfile generates: run go test -run TestSeccompProfile -update", path)
	}
	if !json.Valid(got) {
		t.Fatalf("%s is not valid JSON", path)
	}
	spec := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
	f, err := seccomp.LoadProfile(string(got), spec)
	if err != nil {
		t.Fatalf("docker's loader refuses %s: %v", path, err)
	}
	if f.DefaultAction != specs.ActErrno {
		t.Errorf("default action %s, want SCMP_ACT_ERRNO", f.DefaultAction)
	}
	allowed := func(name string) bool {
		for _, s := range f.Syscalls {
			if s.Action == specs.ActAllow && len(s.Args) == 0 && slices.Contains(s.Names, name) {
				return true
			}
		}
		return false
	}
	for _, n := range UringSyscalls {
		if !allowed(n) {
			t.Errorf("%s is not allowed", n)
		}
		if def, _ := seccomp.GetDefaultProfile(spec); def != nil {
			for _, s := range def.Syscalls {
				if s.Action == specs.ActAllow && slices.Contains(s.Names, n) {
					t.Errorf("Docker's default profile allows %s: the custom profile is not needed any more", n)
				}
			}
		}
	}
	for _, n := range []string{"reboot", "kexec_load", "mount", "init_module"} {
		if allowed(n) {
			t.Errorf("%s is allowed without a capability; the default refuses it", n)
		}
	}
	for _, n := range []string{"sendmsg", "epoll_pwait", "futex", "write"} {
		if !allowed(n) {
			t.Errorf("%s is not allowed: fanoutd needs it", n)
		}
	}
}
