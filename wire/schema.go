package wire

import _ "embed"

//go:embed protocol.schema.json
var schema []byte

// Schema is the protocol's JSON Schema (protocol.schema.json, draft
// 2020-12): every request and every reply line of version Version (a
// version 1 engine's lines validate too). Its $defs name each request
// (hello, admit, decode, finish, reset, bye) and the reply to each
// (hello_reply, admit_reply, ...; error_reply a refusal). What depends on
// the session rather than one line (the version agreed at hello, the
// observations offered, outputs matching their request) is checked by
// Client. Package wire/wiretest validates lines against it.
func Schema() []byte { return append([]byte(nil), schema...) }
