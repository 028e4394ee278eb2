// Package adjudicate judges a token stream against a teacher: for each
// generated position, the rank of our token under the teacher's logits and
// the gap between the teacher's top logit and our token's logit, in nats
// and in bf16 steps. A difference inside the band (default 0.5 nats) is a
// near-tie (a legitimate flip of a greedy choice between two almost equal
// logits, as accumulation order on a card causes); beyond it, a divergence
// (a bug), "far" when our token is outside the teacher's top K (default 20).
//
// The teacher is fed our tokens (teacher forcing), so one flip does not
// cascade: every later position is judged on our own prefix.
//
//   - Judge is the verdict on one position, given the teacher's logits row.
//   - Force runs a qwen3.Decoder (ref, built by NewTeacher) as the teacher
//     over one dump sequence: prefill of the prompt, then a decode of each
//     of our tokens; ForceAll does a whole dump.
//   - Stream runs a teacher beside an engine in-process (the property
//     suite's tolerant mode): each engine call and its outputs are handed
//     to it, the teacher makes the same call (fed the engine's tokens) and
//     the engine's tokens are judged.
//   - Tally collects Judge verdicts by sequence for a caller that runs the
//     teacher itself.
//   - Compare judges two dumps without a model: the first differing token
//     of each sequence, from the top logits the oracle's dump carries.
//   - PlotSVG draws the gap over positions per sequence, band shaded,
//     divergences marked.
//
// It imports bf16, dump, qwen3 and ref of offcard's packages, and gonum's
// plot.
package adjudicate
