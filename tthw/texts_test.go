package tthw_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/offcard/offcard/tt"
)

// Every device-refusal text the C loopback writes is ttnn's (a text of the
// checks table, tt/checks.tsv, filled in), a tt-metal runtime text the
// table does not list (allocator, host copies, traces, capture), or
// offcard's own (tt.ContractPrefix) — the same rule the simulator's texts
// follow, so the loopback answers as the ttnn shim would.
func TestLoopbackTextsAreTTNNs(t *testing.T) {
	checks, err := tt.Checks()
	if err != nil {
		t.Fatal(err)
	}
	var pats []*regexp.Regexp
	for _, c := range checks {
		pats = append(pats, c.TextPattern())
	}
	runtime := []string{
		"Out of Memory: Not enough space to allocate ",                                          // bank_manager.cpp
		"Tensor is not allocated",                                                               // tt.MsgBufferNotAllocated
		"Reads are not supported during trace capture.",                                         // fd_mesh_command_queue.cpp
		"Cannot load new binaries during trace capture.",                                        // tt.MsgProgramCacheMissDuringCapture
		"page table page size in bytes must be a multiple of 32 due to address alignment",       // paged_fill_cache_program_factory.cpp
		"bad optional access",                                                                   // std::bad_optional_access::what()
		"Statically allocated circular buffers in program clash with L1 buffers on core range ", // program.cpp
	}
	lit := `"((?:[^"\\]|\\.)*)"`
	forms := []*regexp.Regexp{
		regexp.MustCompile(`FAIL\(\s*` + lit),
		regexp.MustCompile(`lb_err\(OFFCARD_TT_EDEVICE,\s*[^,]+,\s*` + lit),
	}
	verb := regexp.MustCompile(`%(ll|l)?[dus]`)
	n := 0
	for _, f := range []string{"loopback/ops.c", "loopback/loopback.c"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range forms {
			for _, m := range re.FindAllStringSubmatch(string(src), -1) {
				n++
				text := verb.ReplaceAllString(m[1], "7")
				text = strings.ReplaceAll(text, `\"`, `"`)
				if strings.HasPrefix(text, tt.ContractPrefix) || text == "7" {
					continue // offcard's own; want_bf16's "%s" form is checked at its call
				}
				ok := false
				for _, r := range runtime {
					ok = ok || strings.HasPrefix(text, r)
				}
				for _, p := range pats {
					ok = ok || p.MatchString(text)
				}
				if !ok && !strings.Contains(text, "loopback") {
					t.Errorf("%s: %q is neither ttnn's nor marked offcard's", f, m[1])
				}
			}
		}
	}
	if n < 60 {
		t.Fatalf("found only %d texts: the scan is broken", n)
	}
}
