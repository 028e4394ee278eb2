package tt

// TTMetalCommit is the tenstorrent/tt-metal commit this contract mirrors
// (main, 2026-06-22, about two weeks after v0.72.0). Every behaviour the
// contract states, and every tt-metal source path cited in this package and
// in package sim, refers to this commit.
const TTMetalCommit = "622c6fb9c08b88e8fe05eb8a8194974c05fff618"
