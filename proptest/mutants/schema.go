package mutants

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// SwitchEnv names the environment variable that selects the mutant of a
// schema build: empty (or unset) runs the unmutated code.
const SwitchEnv = "OFFCARD_MUTANT"

// switchVar is the package-level variable each folded package reads
// SwitchEnv into; switchFile is the file that declares it.
const (
	switchVar  = "offcardMutantActive"
	switchFile = "offcard_mutant_switch.go"
)

// A Schema folds many mutants into one source tree, so that one build
// serves them all: every function a mutant edits keeps its original body,
// gains a renamed copy with the mutant's edits, and starts with a switch
// that calls the copy when SwitchEnv names the mutant. With SwitchEnv
// unset, the schema build runs the unmutated source: the prologue's switch
// matches nothing and the copies are never called.
//
// A mutant folds when each of its edits (the part that changes, once the
// text Old and New share at either end is set aside) lies inside one
// function's body or only adds text between top-level declarations (added
// declarations go in unconditionally: nothing but the mutant's copies uses
// them), its anchor occurs once in the unedited file, and the function can
// be called through (named parameters and receiver, no type parameters);
// the others are left in Rest, to be built one by one.
type Schema struct {
	// Files are the edited and added files, by slash-separated path
	// relative to the module root.
	Files map[string][]byte
	// Folded are the mutants the schema build runs; Rest need their own
	// build, each with the reason in Why.
	Folded []Mutant
	Rest   []Mutant
	Why    map[string]string
}

// fnSite is one function of the unedited source a folded mutant edits.
type fnSite struct {
	file       string
	start, end int // the declaration, from "func" to the closing brace
	lbrace     int // the body's opening brace
	nameAt     int // the function name
	name       string
	call       string // the call of a copy: receiver and arguments, %s for the copy's name
	results    bool
	copies     []fnCopy
}

type fnCopy struct {
	mutant string
	name   string
	edits  []offEdit
}

type offEdit struct {
	at       int // offset in the file
	old, new string
}

// BuildSchema folds ms into one tree over the source under root.
func BuildSchema(root string, ms []Mutant) (*Schema, error) {
	s := &Schema{Files: map[string][]byte{}, Why: map[string]string{}}
	srcs := map[string][]byte{}
	parsed := map[string]*ast.File{}
	fsets := map[string]*token.FileSet{}
	sites := map[string]map[int]*fnSite{} // file -> decl start -> site
	var inserts []insertion               // folded mutants' added declarations
	load := func(rel string) error {
		if _, ok := srcs[rel]; ok {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		fs := token.NewFileSet()
		f, err := parser.ParseFile(fs, rel, b, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		srcs[rel], parsed[rel], fsets[rel] = b, f, fs
		sites[rel] = map[int]*fnSite{}
		return nil
	}
	for i, m := range ms {
		if _, err := m.Apply(root); err != nil {
			return nil, err
		}
		type placed struct {
			site *fnSite
			e    offEdit
		}
		var ps []placed
		var adds []insertion // declarations the mutant adds
		why := ""
		for _, e := range m.Edits {
			if err := load(e.File); err != nil {
				return nil, fmt.Errorf("mutant %s: %w", m.Name, err)
			}
			src := srcs[e.File]
			if bytes.Count(src, []byte(e.Old)) != 1 {
				why = "an anchor depends on an earlier edit"
				break
			}
			// Only the part that changes counts: an anchor may run into
			// the signature, or only add text after a declaration.
			at, old, nw := trimEdit(bytes.Index(src, []byte(e.Old)), e.Old, e.New)
			if old == "" && outsideDecls(parsed[e.File], fsets[e.File], at) {
				adds = append(adds, insertion{file: e.File, at: at, text: nw})
				continue
			}
			site, reason := siteOf(parsed[e.File], fsets[e.File], e.File, at, at+len(old))
			if site == nil {
				why = reason
				break
			}
			ps = append(ps, placed{site, offEdit{at: at, old: old, new: nw}})
		}
		if why == "" {
			// Edits of one mutant must not overlap.
			sort.Slice(ps, func(a, b int) bool {
				if ps[a].site.file != ps[b].site.file {
					return ps[a].site.file < ps[b].site.file
				}
				return ps[a].e.at < ps[b].e.at
			})
			for j := 1; j < len(ps); j++ {
				if ps[j].site.file == ps[j-1].site.file && ps[j].e.at < ps[j-1].e.at+len(ps[j-1].e.old) {
					why = "two edits overlap"
				}
			}
		}
		if why != "" {
			s.Rest = append(s.Rest, m)
			s.Why[m.Name] = why
			continue
		}
		for _, p := range ps {
			site, ok := sites[p.site.file][p.site.start]
			if !ok {
				site = p.site
				sites[site.file][site.start] = site
			}
			n := len(site.copies)
			if n == 0 || site.copies[n-1].mutant != m.Name {
				site.copies = append(site.copies, fnCopy{mutant: m.Name, name: fmt.Sprintf("%s_offcardMutant%d", site.name, i)})
				n++
			}
			site.copies[n-1].edits = append(site.copies[n-1].edits, p.e)
		}
		inserts = append(inserts, adds...)
		s.Folded = append(s.Folded, m)
	}
	pkgDirs := map[string]string{}
	files := map[string]bool{}
	for rel, byStart := range sites {
		if len(byStart) > 0 {
			files[rel] = true
		}
	}
	for _, in := range inserts {
		files[in.file] = true
	}
	for rel := range files {
		src := srcs[rel]
		var list []*fnSite
		for _, st := range sites[rel] {
			list = append(list, st)
		}
		// The prologues and added declarations, from the end of the file
		// up, so offsets stay valid.
		ins := []insertion{}
		for _, in := range inserts {
			if in.file == rel {
				ins = append(ins, in)
			}
		}
		for _, st := range list {
			var pro strings.Builder
			fmt.Fprintf(&pro, "\n\tswitch %s {", switchVar)
			for _, c := range st.copies {
				call := fmt.Sprintf(st.call, c.name)
				if st.results {
					fmt.Fprintf(&pro, "\n\tcase %q:\n\t\treturn %s", c.mutant, call)
				} else {
					fmt.Fprintf(&pro, "\n\tcase %q:\n\t\t%s\n\t\treturn", c.mutant, call)
				}
			}
			pro.WriteString("\n\t}")
			ins = append(ins, insertion{file: rel, at: st.lbrace + 1, text: pro.String()})
		}
		sort.SliceStable(ins, func(a, b int) bool { return ins[a].at > ins[b].at })
		out := append([]byte(nil), src...)
		var tail bytes.Buffer
		for _, in := range ins {
			out = append(out[:in.at:in.at], append([]byte(in.text), out[in.at:]...)...)
		}
		sort.Slice(list, func(a, b int) bool { return list[a].start < list[b].start })
		for _, st := range list {
			for _, c := range st.copies {
				body := []byte(string(src[st.start:st.end]))
				edits := append([]offEdit(nil), c.edits...)
				sort.Slice(edits, func(a, b int) bool { return edits[a].at > edits[b].at })
				for _, e := range edits {
					at := e.at - st.start
					body = append(body[:at:at], append([]byte(e.new), body[at+len(e.old):]...)...)
				}
				at := st.nameAt - st.start
				body = append(body[:at:at], append([]byte(c.name), body[at+len(st.name):]...)...)
				fmt.Fprintf(&tail, "\n// %s is %s with mutant %s's edits.\n%s\n", c.name, st.name, c.mutant, body)
			}
		}
		s.Files[rel] = append(out, tail.Bytes()...)
		pkgDirs[path.Dir(rel)] = parsed[rel].Name.Name
	}
	for dir, pkg := range pkgDirs {
		s.Files[path.Join(dir, switchFile)] = fmt.Appendf(nil,
			"package %s\n\nimport \"os\"\n\n// %s names the mutant this schema build runs (%s).\nvar %s = os.Getenv(%q)\n",
			pkg, switchVar, SwitchEnv, switchVar, SwitchEnv)
	}
	return s, nil
}

// insertion is text added at an offset of the unedited file.
type insertion struct {
	file string
	at   int
	text string
}

// trimEdit drops the common prefix and suffix of old and new, an edit at
// offset at: the part of the file that really changes and its offset.
func trimEdit(at int, old, new string) (int, string, string) {
	p := 0
	for p < len(old) && p < len(new) && old[p] == new[p] {
		p++
	}
	q := 0
	for q < len(old)-p && q < len(new)-p && old[len(old)-1-q] == new[len(new)-1-q] {
		q++
	}
	return at + p, old[p : len(old)-q], new[p : len(new)-q]
}

// outsideDecls reports whether offset at lies between the file's
// top-level declarations (an added declaration goes there).
func outsideDecls(f *ast.File, fs *token.FileSet, at int) bool {
	for _, d := range f.Decls {
		if fs.Position(d.Pos()).Offset < at && at < fs.Position(d.End()).Offset {
			return false
		}
	}
	return at >= fs.Position(f.Name.End()).Offset
}

// siteOf is the function whose body holds [from, to) of the file, or nil
// and why it cannot be folded.
func siteOf(f *ast.File, fs *token.FileSet, rel string, from, to int) (*fnSite, string) {
	off := func(p token.Pos) int { return fs.Position(p).Offset }
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil || off(fd.Pos()) > from || off(fd.End()) < to {
			continue
		}
		if from <= off(fd.Body.Lbrace) || to > off(fd.Body.Rbrace) {
			return nil, "an edit touches " + fd.Name.Name + "'s signature"
		}
		if fd.Type.TypeParams != nil || fd.Name.Name == "init" || fd.Name.Name == "main" {
			return nil, fd.Name.Name + " cannot be called through"
		}
		var args []string
		variadic := false
		for _, p := range fd.Type.Params.List {
			if len(p.Names) == 0 {
				return nil, fd.Name.Name + " has an unnamed parameter"
			}
			for _, n := range p.Names {
				if n.Name == "_" {
					return nil, fd.Name.Name + " has a blank parameter"
				}
				args = append(args, n.Name)
			}
			_, variadic = p.Type.(*ast.Ellipsis)
		}
		call := "%s(" + strings.Join(args, ", ")
		if variadic {
			call += "..."
		}
		call += ")"
		if fd.Recv != nil {
			r := fd.Recv.List[0]
			if len(r.Names) == 0 || r.Names[0].Name == "_" {
				return nil, fd.Name.Name + " has an unnamed receiver"
			}
			call = r.Names[0].Name + "." + call
		}
		return &fnSite{
			file: rel, start: off(fd.Pos()), end: off(fd.End()), lbrace: off(fd.Body.Lbrace),
			nameAt: off(fd.Name.Pos()), name: fd.Name.Name, call: call,
			results: fd.Type.Results != nil && len(fd.Type.Results.List) > 0,
		}, ""
	}
	return nil, "an edit lies outside every function body"
}

// Overlay writes the schema's files and a `go build -overlay` file into
// dir and returns the overlay file's path.
func (s *Schema) Overlay(root, dir string) (string, error) {
	return writeOverlay(root, dir, s.Files)
}
