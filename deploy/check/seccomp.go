package check

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/moby/profiles/seccomp"
)

// UringSyscalls are the system calls fanoutd's write pool makes for
// websocket.io_uring, which Docker's default profile refuses (EPERM).
var UringSyscalls = []string{"io_uring_enter", "io_uring_register", "io_uring_setup"}

// SeccompProfile is deploy/seccomp/fanoutd.json: Docker's default seccomp
// profile (github.com/moby/profiles/seccomp, the one dockerd builds in)
// with UringSyscalls added to its unconditional allow list.
func SeccompProfile() ([]byte, error) {
	p := seccomp.DefaultProfile()
	var allow *seccomp.Syscall
	for _, s := range p.Syscalls {
		if s.Action == "SCMP_ACT_ALLOW" && len(s.Args) == 0 && s.Includes == nil && s.Excludes == nil {
			allow = s
			break
		}
	}
	if allow == nil {
		return nil, fmt.Errorf("seccomp: the default profile has no unconditional allow list")
	}
	for _, n := range UringSyscalls {
		if !slices.Contains(allow.Names, n) {
			allow.Names = append(allow.Names, n)
		}
	}
	slices.Sort(allow.Names)
	b, err := json.MarshalIndent(p, "", "\t")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
