package mutants

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ModulePath is the module whose source the catalog edits.
const ModulePath = "github.com/offcard/offcard"

// Edit is one textual replacement: Old must occur exactly once in File (a
// slash-separated path relative to the module root) when the edit is
// applied.
type Edit struct {
	File string `json:"file"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// Mutant is one named bug.
type Mutant struct {
	// Name is the catalog name (offcard mutants --only NAME).
	Name string `json:"name"`
	// Idea is the bug in one sentence.
	Idea string `json:"idea"`
	// Seed marks the seed's own bugs (seed-fix-1498).
	Seed bool `json:"seed_bug,omitempty"`
	// Expect says where the suite should go red and why.
	Expect string `json:"expect"`
	// Prop is the property that kills the mutant in offcard check (the
	// first failing case's): TestCatalogKilled holds it to a run, and an
	// Expect that names a property in parentheses names this one.
	Prop string `json:"prop,omitempty"`
	// Notes documents choices (faithfulness, equivalence).
	Notes string `json:"notes,omitempty"`
	// NeedsSim, when set, says why only the simulator can kill the mutant
	// (its strict mode's findings or its op log): offcard mutants --device
	// tt skips it. Empty: the tolerant mode on a card must kill it.
	NeedsSim string `json:"needs_sim,omitempty"`
	// Scheduler marks a bug of offcard's side of the protocol (the block
	// pool the runner hands tables from), not the engine's: offcard
	// mutants --engine builds it into the checker and runs it against the
	// unmutated offcard-engine.
	Scheduler bool `json:"scheduler,omitempty"`
	// SeenBy lists what an engine must offer for offcard mutants --engine
	// to kill the mutant through the protocol: observations (wire.Obs*),
	// "page_pad" and "follows_hints"; one entry suffices, an entry "a+b"
	// needs both. Empty: the outputs (full exact logits), a refusal or the
	// bye reply do. An engine that offers no entry cannot show the mutant
	// (EngineLacks names what it lacks).
	SeenBy []string `json:"seen_by,omitempty"`
	// Killer (the judge catalog) names the planted engine of proptest's
	// panel whose verdict the mutant must turn, or TEST/CASE: a case of
	// proptest's TestServingPlantsRed, TestJudgeTokenBand or TestRegressions.
	Killer string `json:"killer,omitempty"`
	// Edits are applied in order, each to the previous one's result.
	Edits []Edit `json:"edits"`
}

// Files lists the files the mutant edits, sorted.
func (m Mutant) Files() []string {
	seen := map[string]bool{}
	var fs []string
	for _, e := range m.Edits {
		if !seen[e.File] {
			seen[e.File] = true
			fs = append(fs, e.File)
		}
	}
	sort.Strings(fs)
	return fs
}

// AnchorError reports an edit whose anchor does not occur exactly once.
type AnchorError struct {
	Mutant string
	File   string
	Edit   int // index in Mutant.Edits
	Anchor string
	Count  int
}

func (e *AnchorError) Error() string {
	a := e.Anchor
	if i := strings.IndexByte(a, '\n'); i >= 0 {
		a = a[:i] + "..."
	}
	return fmt.Sprintf("mutant %s: edit %d: anchor %q occurs %d times in %s (want exactly once; the source moved, rewrite the mutant)",
		e.Mutant, e.Edit, a, e.Count, e.File)
}

// ByName returns the catalog mutant (or the candidate) called name.
func ByName(name string) (Mutant, bool) {
	for _, m := range append(Catalog[:len(Catalog):len(Catalog)], Candidates...) {
		if m.Name == name {
			return m, true
		}
	}
	return Mutant{}, false
}

// Names lists the catalog's names in catalog order.
func Names() []string {
	ns := make([]string, len(Catalog))
	for i, m := range Catalog {
		ns[i] = m.Name
	}
	return ns
}

// Apply reads the mutant's files under root and returns their edited
// contents, keyed by the file's path relative to root. An anchor that does
// not occur exactly once is an *AnchorError.
func (m Mutant) Apply(root string) (map[string][]byte, error) {
	if len(m.Edits) == 0 {
		return nil, fmt.Errorf("mutant %s has no edits", m.Name)
	}
	out := map[string][]byte{}
	for i, e := range m.Edits {
		src, ok := out[e.File]
		if !ok {
			b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(e.File)))
			if err != nil {
				return nil, fmt.Errorf("mutant %s: %w", m.Name, err)
			}
			src = b
		}
		if e.Old == "" || e.Old == e.New {
			return nil, fmt.Errorf("mutant %s: edit %d is empty or changes nothing", m.Name, i)
		}
		if n := bytes.Count(src, []byte(e.Old)); n != 1 {
			return nil, &AnchorError{Mutant: m.Name, File: e.File, Edit: i, Anchor: e.Old, Count: n}
		}
		out[e.File] = bytes.Replace(src, []byte(e.Old), []byte(e.New), 1)
	}
	return out, nil
}

// Overlay applies the mutant to the source under root and writes the
// edited files and a `go build -overlay` file into dir. It returns the
// overlay file's path.
func (m Mutant) Overlay(root, dir string) (string, error) {
	files, err := m.Apply(root)
	if err != nil {
		return "", err
	}
	return writeOverlay(root, dir, files)
}

// writeOverlay writes files (by slash-separated path relative to root)
// under dir/src and the overlay file that puts them in place of (or
// beside) root's, dir/overlay.json, and returns its path.
func writeOverlay(root, dir string, files map[string][]byte) (string, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	rels := make([]string, 0, len(files))
	for rel := range files {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	replace := map[string]string{}
	for _, rel := range rels {
		dst := filepath.Join(dir, "src", filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, files[rel], 0o644); err != nil {
			return "", err
		}
		replace[filepath.Join(absRoot, filepath.FromSlash(rel))] = dst
	}
	js, err := json.MarshalIndent(map[string]map[string]string{"Replace": replace}, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, js, 0o644)
}

// ErrNotInModule is returned by FindModuleRoot outside the offcard source.
var ErrNotInModule = errors.New("not inside the offcard source tree (no go.mod of module " + ModulePath +
	" in this directory or above; run from the checkout or pass --repo DIR)")

// FindModuleRoot walks up from dir to the directory whose go.mod declares
// ModulePath.
func FindModuleRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if isModuleRoot(d) {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", ErrNotInModule
		}
		d = up
	}
}

// CheckModuleRoot reports whether dir is the offcard module's root.
func CheckModuleRoot(dir string) error {
	if !isModuleRoot(dir) {
		return fmt.Errorf("%s: %w", dir, ErrNotInModule)
	}
	return nil
}

func isModuleRoot(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == ModulePath {
			return true
		}
	}
	return false
}
