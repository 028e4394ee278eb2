package safetensors

// DTypes lists every dtype name the reference reader knows, in the
// reference's enum order (increasing alignment), which Write uses to order
// tensors.
var DTypes = []string{
	"BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8",
	"F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
	"I16", "U16", "F16", "BF16",
	"I32", "U32", "F32",
	"C64", "F64", "I64", "U64",
}

type dtypeInfo struct {
	rank int // position in DTypes
	bits int
}

var dtypes = func() map[string]dtypeInfo {
	bits := map[string]int{
		"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
		"F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
		"I16": 16, "U16": 16, "F16": 16, "BF16": 16,
		"I32": 32, "U32": 32, "F32": 32,
		"C64": 64, "F64": 64, "I64": 64, "U64": 64,
	}
	m := make(map[string]dtypeInfo, len(DTypes))
	for i, name := range DTypes {
		m[name] = dtypeInfo{rank: i, bits: bits[name]}
	}
	return m
}()

// DTypeBits returns the size in bits of one element of the named dtype, and
// whether the name is known. Names are case-sensitive.
func DTypeBits(name string) (int, bool) {
	d, ok := dtypes[name]
	return d.bits, ok
}
