package qwen3

import (
	"path/filepath"
	"testing"
)

// The digest names the model, not how it was made: synthesised and
// exported-then-loaded agree; another seed, a changed weight or a changed
// shaping field differ.
func TestDigest(t *testing.T) {
	cfg, _ := Preset("tiny")
	a, _ := Synth(cfg, 1)
	b, _ := Synth(cfg, 2)
	da := a.Digest()
	if len(da) != len("sha256:")+16 || da != a.Digest() {
		t.Fatalf("digest %q not stable", da)
	}
	if b.Digest() == da {
		t.Error("seeds 1 and 2 have the same digest")
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := a.Export(dir); err != nil {
		t.Fatal(err)
	}
	l, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Digest() != da {
		t.Errorf("exported and loaded: %s, synthesised: %s", l.Digest(), da)
	}
	c, _ := Synth(cfg, 1)
	c.Layers[1].Down[7] ^= 1
	if c.Digest() == da {
		t.Error("a changed weight keeps the digest")
	}
	c, _ = Synth(cfg, 1)
	c.Config.RopeTheta = 10000
	if c.Digest() == da {
		t.Error("a changed rope_theta keeps the digest")
	}
	c, _ = Synth(cfg, 1)
	c.Config.MaxPositionEmbeddings = 1 << 20 // changes no logit
	if c.Digest() != da {
		t.Error("max_position_embeddings changes the digest")
	}
}
