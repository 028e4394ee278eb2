package mutants

// Perturbations are deliberate bugs of the simulator itself. The engine
// catalog run on a perturbed simulator (offcard mutants --perturb NAME)
// shows which engine mutants that simulator bug would hide; the
// simulator's own unit tests must catch every perturbation
// (TestSimPerturbationsCaught), so a hidden mutant can only stay hidden
// behind a simulator bug its tests would flag first.
var Perturbations = []Mutant{
	{
		Name:   "sim-alloc-never-reuse",
		Idea:   "the DRAM and L1 allocators never hand a freed address out again (free forgets the range)",
		Expect: "sim's allocator tests fail (immediate reuse, coalescing); engine mutants whose harm is a freed address handed to another tensor survive",
		Edits: []Edit{
			{File: "sim/alloc.go",
				Old: "\tdelete(a.used, addr)\n\ti := sort.Search(len(a.free)",
				New: "\tdelete(a.used, addr)\n\tif addr > 0 { // perturbation: freed ranges never reused\n\t\treturn\n\t}\n\ti := sort.Search(len(a.free)"},
		},
	},
	{
		Name:   "sim-overlap-misses-exact",
		Idea:   "the strict check of an allocation against a live trace's freed operands misses an allocation at exactly the freed address",
		Expect: "sim's hazard tests fail (allocation-overlaps-live-trace at the same address); engine mutants found only by that finding survive",
		Edits: []Edit{
			{File: "sim/trace.go",
				Old: "if b.addr < r.addr+r.perBank && r.addr < b.addr+size {",
				New: "if b.addr != r.addr && b.addr < r.addr+r.perBank && r.addr < b.addr+size { // perturbation"},
		},
	},
}

// Perturbed is m with the perturbation p's edits applied after its own.
func Perturbed(m, p Mutant) Mutant {
	m.Edits = append(append([]Edit(nil), m.Edits...), p.Edits...)
	m.Name = m.Name + "+" + p.Name
	return m
}

// PerturbationByName returns the perturbation called name.
func PerturbationByName(name string) (Mutant, bool) {
	for _, p := range Perturbations {
		if p.Name == name {
			return p, true
		}
	}
	return Mutant{}, false
}
