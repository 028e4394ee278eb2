// FOLD16(z, y, x, ty, tx) folds the 16 float32 lanes of z (whose low
// halves are y and x) in the canonical tree order (reduceLanes: lanes
// l and l+8, then l+4, l+2, l+1) into the low lane of x; ty and tx are
// scratch.
#define FOLD16(z, y, x, ty, tx) \
	VEXTRACTF64X4 $1, z, ty; \
	VADDPS ty, y, y; \
	VEXTRACTF128 $1, y, tx; \
	VADDPS tx, x, x; \
	VPERMILPS $0x0E, x, tx; \
	VADDPS tx, x, x; \
	VPERMILPS $0x01, x, tx; \
	VADDSS tx, x, x
