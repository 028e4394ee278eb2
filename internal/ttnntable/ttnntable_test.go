package ttnntable

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offcard/offcard/tt"
)

const src = `// a header
void Op::validate_on_program_cache_miss(const Attrs& a, const Args& t) {
    // TT_FATAL(false, "a comment is no check");
    TT_FATAL(t.x.dtype() == DataType::INT32, "Expect x to be INT32, got {}", t.x.dtype());
    if (a.flag) {
        TT_FATAL(
            f(t.x, (1, 2)) == 3,   // a comment inside
            "Shape {} must be "
            "divisible by {} (\"quoted\", {{braces}})",
            t.x.shape(),
            7);
    }
    auto l = [&]() { TT_THROW("Unsupported mode {}", a.mode); };
    const char* s = "TT_FATAL(not, \"a check\")";
}

void Op::validate_on_program_cache_hit(const Attrs& a, const Args& t) {
    TT_FATAL(a.k > 0, "k must be positive");
}

void helper(int x);
void helper(int x) { TT_FATAL(x == 1, "first"); }
void helper(long x) { TT_FATAL(x == 2, "second"); }
`

func TestExtract(t *testing.T) {
	got, err := Extract(src, "Op::validate_on_program_cache_miss")
	if err != nil {
		t.Fatal(err)
	}
	want := []Found{
		{4, "TT_FATAL", "t.x.dtype() == DataType::INT32", "Expect x to be INT32, got {}"},
		{6, "TT_FATAL", "f(t.x, (1, 2)) == 3", "Shape {} must be divisible by {} (\"quoted\", {{braces}})"},
		{13, "TT_THROW", "", "Unsupported mode {}"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d checks %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("check %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := Extract(src, "Op::validate"); err == nil {
		t.Error("a name that is only a prefix of a definition found one")
	}
	both, _ := ExtractFunc(src, "helper")
	second, _ := ExtractFunc(src, "helper#2")
	if len(both) != 2 || len(second) != 1 || second[0].Text != "second" {
		t.Errorf("helper: %+v; helper#2: %+v", both, second)
	}
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// A table read at one commit, compared with a later commit where one text,
// one condition and one line changed, one check went and one came.
func TestDiffAgainstACommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	const path = "ttnn/op.cpp"
	git(t, dir, "init", "-q")
	if err := os.MkdirAll(filepath.Join(dir, "ttnn"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, path), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, dir, "add", ".")
		git(t, dir, "commit", "-q", "-m", "x")
	}
	write(src)
	found, err := Extract(src, "Op::validate_on_program_cache_miss")
	if err != nil {
		t.Fatal(err)
	}
	table := "# commit x\n" + strings.Join(Rows("op", path, "Op::validate_on_program_cache_miss", found, 1), "\n") + "\n"
	checks, err := tt.ParseChecks(table)
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := Diff(checks, GitSource(filepath.Join(dir, ".git"), "HEAD")); err != nil || len(ch) != 0 {
		t.Fatalf("the commit the table was read at: %v %v", ch, err)
	}
	later := strings.NewReplacer(
		"// a header\n", "// a header\n// one more line\n",
		`"Expect x to be INT32, got {}"`, `"Expect x to be INT32 or UINT32, got {}"`,
		"f(t.x, (1, 2)) == 3", "f(t.x, (1, 2)) >= 3",
		`TT_THROW("Unsupported mode {}", a.mode);`, `TT_FATAL(a.mode < 2, "Mode {} is new", a.mode);`,
	).Replace(src)
	write(later)
	changes, err := Diff(checks, GitSource(filepath.Join(dir, ".git"), "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range changes {
		kinds = append(kinds, c.Kind+":"+c.Check.ID)
		if c.String() == "" {
			t.Error("empty change line")
		}
	}
	if got, want := strings.Join(kinds, " "), "text:op.1 cond:op.2 gone:op.3 new:op.1"; got != want {
		t.Errorf("changes %q, want %q", got, want)
	}
	// Only a line moved: reported as a line change.
	write(strings.Replace(src, "// a header\n", "// a header\n\n", 1))
	changes, err = Diff(checks, GitSource(filepath.Join(dir, ".git"), "HEAD"))
	if err != nil || len(changes) != 3 || changes[0].Kind != "line" {
		t.Errorf("a one-line shift: %v %v", changes, err)
	}
	if _, err := Diff(checks, GitSource(filepath.Join(dir, ".git"), "no-such-rev")); err == nil {
		t.Error("an unknown revision gave no error")
	}
}

// The embedded table parses, every entry names a function the extractor
// can find (its id is op.n), and every left-out entry says why.
func TestEmbeddedTable(t *testing.T) {
	checks, err := tt.Checks()
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) < 700 {
		t.Fatalf("%d entries", len(checks))
	}
	for _, c := range checks {
		if !strings.HasPrefix(c.ID, c.Op+".") || c.File == "" || c.Func == "" || c.Line <= 0 || (c.Kind != "TT_FATAL" && c.Kind != "TT_THROW") {
			t.Errorf("malformed entry %+v", c)
		}
	}
}
