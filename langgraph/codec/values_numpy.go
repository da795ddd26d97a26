package codec

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/historyd/historyd/langgraph/codec/internal/mptoken"
)

// npLayout is a numpy dtype historyd turns into numbers.
type npLayout struct {
	kind  byte // 'b' bool, 'i' signed, 'u' unsigned, 'f' float
	size  int
	order binary.ByteOrder
}

// parseNumericDtype reads a dtype.str such as "<f8" or "|b1". ok is false
// for dtypes kept as raw bytes.
func parseNumericDtype(s string) (npLayout, bool) {
	if len(s) < 3 {
		return npLayout{}, false
	}
	var order binary.ByteOrder
	switch s[0] {
	case '<', '|', '=':
		// numpy writes '=' only for native order, and its wheels exist for
		// little-endian machines in practice.
		order = binary.LittleEndian
	case '>':
		order = binary.BigEndian
	default:
		return npLayout{}, false
	}
	size, err := strconv.Atoi(s[2:])
	if err != nil || s[2] < '0' || s[2] > '9' {
		return npLayout{}, false
	}
	l := npLayout{kind: s[1], size: size, order: order}
	switch l.kind {
	case 'b':
		return l, size == 1
	case 'i', 'u':
		return l, size == 1 || size == 2 || size == 4 || size == 8
	case 'f':
		return l, size == 2 || size == 4 || size == 8
	}
	return npLayout{}, false
}

// decodeNumpy turns an ext 6 payload (dtype.str, shape, order, buffer) into
// nested lists like ndarray.tolist(), or into a raw map for dtypes and
// orders historyd does not interpret. depth is the level of the extension's
// parent; the outermost list sits at depth+1.
func (d *mpDecoder) decodeNumpy(t mptoken.Token, tup []any, depth int) (any, error) {
	dtype, ok1 := tup[0].(string)
	shapeList, ok2 := tup[1].([]any)
	order, ok3 := tup[2].(string)
	buf, ok4 := tup[3].([]byte)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return nil, d.Malformed(t.Off, "ext 6 (numpy) payload has the wrong types: want (str, list, str, bin)")
	}
	dims := make([]int, len(shapeList))
	for i, v := range shapeList {
		n, ok := v.(int64)
		if !ok || n < 0 || n > math.MaxInt32 {
			return nil, d.Malformed(t.Off, "ext 6 (numpy) shape %s is not a list of sizes", string(AppendJSON(nil, shapeList)))
		}
		dims[i] = int(n)
	}
	raw := map[string]any{"dtype": dtype, "shape": shapeList, "order": order, "data": buf}
	layout, numeric := parseNumericDtype(dtype)
	if !numeric || (order != "C" && order != "F") {
		return raw, nil
	}
	// Element count, refusing shapes the buffer cannot back. Sizes are
	// multiplied only while the product stays within the buffer, so the
	// product cannot overflow.
	count := 1
	zero := false
	for _, n := range dims {
		if n == 0 {
			zero = true
		}
	}
	if zero {
		count = 0
	} else {
		for _, n := range dims {
			if count > len(buf)/n {
				return nil, d.Malformed(t.Off, "ext 6 (numpy) shape %v needs more than the %d bytes of its buffer", dims, len(buf))
			}
			count *= n
		}
	}
	if count > len(buf)/layout.size || count*layout.size != len(buf) {
		return nil, d.Malformed(t.Off, "ext 6 (numpy) buffer holds %d bytes, dtype %s and shape %v need %d", len(buf), dtype, dims, count*layout.size)
	}
	if len(dims) == 0 {
		return layout.element(buf, 0), nil
	}
	if depth+len(dims) > d.maxDepth {
		return nil, depthError(d.maxDepth, depth+len(dims), t.Off)
	}
	if zero && !fewLists(dims, len(d.Buf)) {
		// An empty array can announce millions of empty rows with no data
		// behind them; keep it raw rather than build them.
		return raw, nil
	}
	strides := make([]int, len(dims))
	step := 1
	if order == "C" {
		for i := len(dims) - 1; i >= 0; i-- {
			strides[i] = step
			step *= max(dims[i], 1)
		}
	} else {
		for i := range dims {
			strides[i] = step
			step *= max(dims[i], 1)
		}
	}
	return layout.build(buf, dims, strides, 0, 0), nil
}

// fewLists reports whether the nested lists of a zero-size array number at
// most limit. Lists stop at the first zero dimension.
func fewLists(dims []int, limit int) bool {
	total, level := 0, 1
	for _, n := range dims {
		total += level
		if total > limit {
			return false
		}
		if n == 0 {
			return true
		}
		if level > limit/n {
			return false
		}
		level *= n
	}
	return total <= limit
}

// build makes the nested list for dimension dim starting at element index
// at. Its recursion is bounded by the number of dimensions, which the
// caller has checked against MaxDepth.
func (l npLayout) build(buf []byte, dims, strides []int, dim, at int) []any {
	out := make([]any, dims[dim])
	for i := range out {
		idx := at + i*strides[dim]
		if dim == len(dims)-1 {
			out[i] = l.element(buf, idx)
		} else {
			out[i] = l.build(buf, dims, strides, dim+1, idx)
		}
	}
	return out
}

func (l npLayout) element(buf []byte, idx int) any {
	b := buf[idx*l.size : (idx+1)*l.size]
	var u uint64
	switch l.size {
	case 1:
		u = uint64(b[0])
	case 2:
		u = uint64(l.order.Uint16(b))
	case 4:
		u = uint64(l.order.Uint32(b))
	default:
		u = l.order.Uint64(b)
	}
	switch l.kind {
	case 'b':
		return u != 0
	case 'i':
		shift := 64 - 8*uint(l.size)
		return int64(u<<shift) >> shift
	case 'u':
		if u > math.MaxInt64 {
			return u
		}
		return int64(u)
	}
	switch l.size {
	case 2:
		return halfToFloat(uint16(u))
	case 4:
		return float64(math.Float32frombits(uint32(u)))
	}
	return math.Float64frombits(u)
}

// halfToFloat widens an IEEE 754 binary16 value.
func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1+frac/1024, exp-15)
}
