package conform_test

import (
	"path/filepath"
	"testing"

	"github.com/offcard/offcard/conform"
	"github.com/offcard/offcard/tthw/tthwtest"
)

// cMutants are deliberate bugs in the loopback's C code; conform must fail
// the named case on each (and the unmutated loopback passes it:
// TestLoopbackConforms).
var cMutants = []struct {
	name, file, old, new, fails string
}{
	{"plus-one-no-skip", "ops.c", "if (o->i[0] && (x < 0 || x == INT32_MAX)) continue;", "if (0) continue;", "plus-one"},
	{"update-minus-one-not-skipped", "ops.c", "if (raw == 0xFFFFFFFFu) continue;", "", "paged-update-cache"},
	{"page-table-off-by-one", "ops.c", "(uint32_t)(cb + 4ull * virt)", "(uint32_t)(cb + 4ull * (virt + 1))", "paged-update-cache"},
	{"fill-minus-one-not-skipped", "ops.c", "if (phys == 0xFFFFFFFFu) continue;", "", "paged-fill-cache"},
	{"allocator-last-fit", "loopback.c", "if (pick < 0 || !a->bottom_up) pick = (long)i;\n    if (a->bottom_up) break;", "pick = (long)i;", "allocator"},
	{"capture-executes", "loopback.c", "  if (d->capturing) {\n    if (!grow((void **)&d->rec", "  if (d->capturing && !lb_exec(d, &o)) {\n    if (!grow((void **)&d->rec", "trace-replay-baked-addresses"},
	{"silu-missing", "ops.c", "a[i] / (1.0f + expf(-a[i])) * b[i]", "a[i] * b[i]", "silu-mul"},
	{"sdpa-scale-ignored", "ops.c", "float scale = o->f[0] != 0 ? o->f[0] : 1.0f / sqrtf((float)dh);", "float scale = 1.0f;", "sdpa-decode"},
	{"heads-v-reads-k", "ops.c", "        col += heads * dh;", "        col += i == 1 ? 0 : heads * dh;", "create-qkv-heads"},
	{"sdpa-prefill-not-causal", "ops.c", "int64_t n = o->i[0] ? i + 1 : sk;", "int64_t n = sk;", "sdpa-prefill"},
	{"sdpa-prefill-causal-off-by-one", "ops.c", "int64_t n = o->i[0] ? i + 1 : sk;", "int64_t n = o->i[0] ? (i + 2 < sk ? i + 2 : sk) : sk;", "sdpa-prefill"},
	{"sdpa-prefill-wrong-kv-head", "ops.c", "const float *kb = k + (size_t)((b * kvh + h / (heads / kvh))", "const float *kb = k + (size_t)((b * kvh + h % kvh)", "sdpa-prefill"},
	{"rope-prefill-decode-rows", "ops.c", "? i % hh : i / hh;", "? i / hh : i / hh;", "rotary-embedding-hf-prefill"},
	{"concat-prefill-heads-swapped", "ops.c", "memcpy(r + ((bb * seq + s) * heads + h) * dh,", "memcpy(r + ((bb * seq + s) * heads + (heads - 1 - h)) * dh,", "prefill-create-concat-heads"},
	{"create-heads-prefill-k-not-transposed", "ops.c", "int tk = i == 1 && o->i[2] != 0;", "int tk = 0;", "prefill-create-concat-heads"},
	{"create-heads-prefill-k-is-q", "ops.c", "col += dh * heads; /* the next group of heads */", "col += i == 0 ? 0 : dh * heads;", "prefill-create-concat-heads"},
}

func TestCMutantsFailTheirCase(t *testing.T) {
	dir := t.TempDir()
	for _, m := range cMutants {
		t.Run(m.name, func(t *testing.T) {
			lib, err := tthwtest.Build(filepath.Join(dir, m.name+".so"), tthwtest.Edit{File: m.file, Old: m.old, New: m.new})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := conform.Run(conform.Options{Lib: lib, Only: m.fails}, conform.Cases(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			hit := false
			for _, r := range rep.Results {
				if !r.OK {
					failed = append(failed, r.Name)
					if r.Name == m.fails {
						hit = true
						t.Logf("%s: %s", r.Name, r.Detail)
					}
				}
			}
			if !hit {
				t.Errorf("mutant %s: case %s passed (failed: %v)", m.name, m.fails, failed)
			}
		})
	}
}
