// Package adjudicate judges a token stream against a teacher: for each
// generated position, the rank of our token under the teacher's logits and
// the gap between the teacher's top logit and our token's logit, in nats
// and in bf16 steps. A difference inside the band is a near-tie (a
// legitimate flip of a greedy choice between two almost equal logits, as
// accumulation order on a card causes); beyond it, a divergence (a bug).
//
// The teacher is fed our tokens (teacher forcing), so one flip does not
// cascade: every later position is judged on our own prefix. Judge is the
// per-position verdict; the callers (offcard adjudicate, the property
// suite's tolerant mode) provide the teacher's logits row for our prefix.
package adjudicate
