package input

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"

	yamlv2 "go.yaml.in/yaml/v2"
)

// The fast path: most documents a run reads are written by a program
// (kubectl get -o yaml, sigs.k8s.io/yaml, the driver's own tools) and use
// a small part of YAML: block mappings and sequences, one-line scalars,
// plain or quoted, "{}" and "[]". fastYAMLToJSON converts such a document
// to JSON in one pass over its lines, with no YAML event stream and no
// generic tree in between. It accepts a document only where it knows
// its answer is the exact path's (yamlDocToJSON: go.yaml.in/yaml/v2 and
// the conversion to JSON), byte for byte. Anything else
// (tabs, non-ASCII bytes, anchors, tags, block scalars, flow collections
// with content, duplicate keys, keys that are not plain strings, a
// structure it does not recognise) returns ok == false, and the document
// is read by the exact path, which also gives the errors: the fast path
// never reports one. Plain scalars that could be anything but a string
// (those starting with a digit, a sign, a dot, or one of YAML 1.1's bool
// and null words) are resolved by go.yaml.in/yaml/v2 itself, once per
// distinct text.

// fastMaxDepth bounds the nesting the fast path follows; deeper
// documents take the exact path.
const fastMaxDepth = 64

// fastScalarCacheSize bounds the resolved plain scalars a worker keeps.
const fastScalarCacheSize = 1 << 14

// scalarCache holds the JSON of plain scalars resolved by yaml/v2 (nil:
// the exact path must decide). One per decoding goroutine.
type scalarCache map[string][]byte

type fastLine struct {
	indent int
	text   []byte // from the first non-blank byte, trailing blanks cut
}

type fastParser struct {
	lines []fastLine // content lines only: blank and comment lines are gaps
	gap   []bool     // gap[i]: a blank or comment line precedes lines[i]
	i     int
	out   []byte
	cache scalarCache
	depth int

	keys   [][]byte // the keys of the mappings being read, innermost last
	starts []int    // where each key's entry starts in out

	// The object's type and name, seen on the way (parseObject need not
	// read the JSON again for them): metaBad when one is not a string.
	meta    typeMeta
	metaBad bool
	inMeta  bool // in the top mapping's metadata value
}

// noteMeta records the value of apiVersion, kind, metadata.name or
// metadata.namespace.
func (p *fastParser) noteMeta(key []byte, js []byte) {
	var f *string
	switch k := string(key); {
	case k == "apiVersion" && !p.inMeta:
		f = &p.meta.APIVersion
	case k == "kind" && !p.inMeta:
		f = &p.meta.Kind
	case k == "name" && p.inMeta:
		f = &p.meta.Metadata.Name
	case k == "namespace" && p.inMeta:
		f = &p.meta.Metadata.Namespace
	default:
		return
	}
	if len(js) == 0 || js[0] != '"' || json.Unmarshal(js, f) != nil {
		p.metaBad = true
	}
}

// lineBuf keeps a parser's line index between documents: it is as long
// as the document has lines (32 bytes a line, more than the JSON), and
// a fresh one per document was a third of the fast path's allocation.
type lineBuf struct {
	lines []fastLine
	gap   []bool
}

var lineBufs = sync.Pool{New: func() any { return new(lineBuf) }}

// fastYAMLToJSON returns the JSON of a YAML document, or ok == false when
// the document is not one the fast path reads (see above).
func fastYAMLToJSON(doc []byte, cache scalarCache) (js []byte, ok bool) {
	js, _, ok = fastYAMLToJSONMeta(doc, cache)
	return js, ok
}

// fastYAMLToJSONMeta is fastYAMLToJSON that also returns the object's
// apiVersion, kind and metadata's name and namespace as encoding/json
// reads them into typeMeta, or nil when it cannot tell.
func fastYAMLToJSONMeta(doc []byte, cache scalarCache) (js []byte, meta *typeMeta, ok bool) {
	for _, b := range doc {
		if b >= 0x7f || (b < 0x20 && b != '\n') {
			return nil, nil, false // tabs, CR, control bytes, non-ASCII
		}
	}
	n := bytes.Count(doc, []byte{'\n'}) + 1
	lb := lineBufs.Get().(*lineBuf)
	p := &fastParser{cache: cache, lines: slices.Grow(lb.lines[:0], n), gap: slices.Grow(lb.gap[:0], n)}
	defer func() {
		clear(p.lines) // no hold on the document once it is read
		lb.lines, lb.gap = p.lines[:0], p.gap[:0]
		lineBufs.Put(lb)
	}()
	gap := false
	textBytes := 0 // the lines' bytes without indentation: what the JSON spells, give or take its quotes
	for len(doc) > 0 {
		line := doc
		if k := bytes.IndexByte(doc, '\n'); k >= 0 {
			line, doc = doc[:k], doc[k+1:]
		} else {
			doc = nil
		}
		ind := 0
		for ind < len(line) && line[ind] == ' ' {
			ind++
		}
		text := bytes.TrimRight(line[ind:], " ")
		if len(text) == 0 || text[0] == '#' {
			gap = true
			continue
		}
		if text[0] == '%' || (ind == 0 && (bytes.HasPrefix(text, []byte("---")) || bytes.HasPrefix(text, []byte("...")))) {
			return nil, nil, false // a directive or a marker the splitter kept
		}
		p.lines = append(p.lines, fastLine{ind, text})
		p.gap = append(p.gap, gap)
		gap = false
		textBytes += len(text)
	}
	// Room for the JSON at once: each line's text, then quotes, a comma
	// and a brace or bracket. Growing it by doubling allocated twice over.
	p.out = make([]byte, 0, textBytes+6*len(p.lines)+2)
	if len(p.lines) == 0 || p.lines[0].indent != 0 {
		return nil, nil, false
	}
	if !p.node(0) || p.i != len(p.lines) {
		return nil, nil, false
	}
	if p.metaBad || p.out[0] != '{' {
		return p.out, nil, true
	}
	return p.out, &p.meta, true
}

// node reads the mapping or sequence whose first line is p.lines[p.i],
// at indent n.
func (p *fastParser) node(n int) bool {
	if p.depth++; p.depth > fastMaxDepth {
		return false
	}
	defer func() { p.depth-- }()
	if isSeqEntry(p.lines[p.i].text) {
		return p.sequence(n)
	}
	return p.mapping(n)
}

func isSeqEntry(t []byte) bool { return t[0] == '-' && (len(t) == 1 || t[1] == ' ') }

// mapping reads the block mapping at indent n.
func (p *fastParser) mapping(n int) bool {
	p.out = append(p.out, '{')
	// This mapping's keys and where their entries start in p.out, on
	// stacks the nested mappings share.
	base := len(p.keys)
	defer func() { p.keys, p.starts = p.keys[:base], p.starts[:base] }()
	var many map[string]bool // past a few keys, a set instead of a scan
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < n {
			break
		}
		if l.indent > n || isSeqEntry(l.text) {
			return false
		}
		key, rest, ok := splitKey(l.text)
		if !ok {
			return false
		}
		// A duplicate key is the exact path's to report.
		if many != nil {
			if many[string(key)] {
				return false
			}
			many[string(key)] = true
		} else {
			for _, k := range p.keys[base:] {
				if bytes.Equal(k, key) {
					return false
				}
			}
			if len(p.keys)-base == 16 {
				many = map[string]bool{string(key): true}
				for _, k := range p.keys[base:] {
					many[string(k)] = true
				}
			}
		}
		if len(p.keys) > base {
			p.out = append(p.out, ',')
		}
		p.keys = append(p.keys, key)
		p.starts = append(p.starts, len(p.out))
		p.out = appendJSONString(p.out, key)
		p.out = append(p.out, ':')
		p.i++
		value := len(p.out)
		top := p.depth == 1
		if top {
			p.inMeta = string(key) == "metadata"
		}
		if v := bytes.TrimLeft(rest, " "); len(v) > 0 && v[0] != '#' {
			if !p.inline(v, n) {
				return false
			}
		} else if !p.block(n, true) {
			return false
		}
		if top {
			p.inMeta = false
		}
		if top || (p.inMeta && p.depth == 2) {
			p.noteMeta(key, p.out[value:])
		}
	}
	p.sortEntries(p.keys[base:], p.starts[base:])
	p.out = append(p.out, '}')
	return true
}

// sortEntries puts a mapping's entries, which start at starts in p.out
// and end with it, in the order of their keys, as encoding/json writes a
// map: the JSON is then the exact path's byte for byte, which matters
// where a decoder keeps raw JSON (runtime.RawExtension, opaque device
// configuration). Writers of YAML mostly sort keys already.
func (p *fastParser) sortEntries(keys [][]byte, starts []int) {
	if slices.IsSortedFunc(keys, bytes.Compare) {
		return
	}
	type entry struct {
		key        []byte
		start, end int
	}
	es := make([]entry, len(keys))
	for i := range keys {
		end := len(p.out)
		if i+1 < len(keys) {
			end = starts[i+1] - 1 // the comma
		}
		es[i] = entry{keys[i], starts[i], end}
	}
	slices.SortFunc(es, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
	sorted := make([]byte, 0, len(p.out)-starts[0])
	for i, e := range es {
		if i > 0 {
			sorted = append(sorted, ',')
		}
		sorted = append(sorted, p.out[e.start:e.end]...)
	}
	copy(p.out[starts[0]:], sorted)
}

// sequence reads the block sequence at indent n.
func (p *fastParser) sequence(n int) bool {
	p.out = append(p.out, '[')
	for first := true; p.i < len(p.lines); first = false {
		l := p.lines[p.i]
		if l.indent < n || (l.indent == n && !isSeqEntry(l.text)) {
			break
		}
		if l.indent > n {
			return false
		}
		if !first {
			p.out = append(p.out, ',')
		}
		rest := l.text[1:]
		s := 0
		for s < len(rest) && rest[s] == ' ' {
			s++
		}
		rest = rest[s:]
		switch {
		case len(rest) == 0 || rest[0] == '#':
			p.i++
			if !p.block(n, false) {
				return false
			}
		case isSeqEntry(rest):
			return false // "- - x"
		case isKeyLine(rest):
			// "- key: value": a mapping at the key's column, its first
			// line the rest of this one.
			c := n + 1 + s
			p.lines[p.i] = fastLine{c, rest}
			p.depth++
			ok := p.depth <= fastMaxDepth && p.mapping(c)
			p.depth--
			if !ok {
				return false
			}
		default:
			p.i++
			if !p.inline(rest, n) {
				return false
			}
		}
	}
	p.out = append(p.out, ']')
	return true
}

// block reads the value of a key or item with nothing after it on its
// line: a node on the next lines, indented more than n (or, for a key, a
// sequence at n itself), or else null.
func (p *fastParser) block(n int, key bool) bool {
	if p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent > n || (key && l.indent == n && isSeqEntry(l.text)) {
			if !isSeqEntry(l.text) && !isKeyLine(l.text) {
				return false // a scalar on the next line
			}
			return p.node(l.indent)
		}
	}
	p.out = append(p.out, "null"...)
	return true
}

// inline reads the scalar v after "key: " or "- ", in a block at indent n
// (a plain scalar may go on over the next lines, indented more).
func (p *fastParser) inline(v []byte, n int) bool {
	switch v[0] {
	case '"', '\'':
		s, rest, ok := quoted(v)
		if !ok || !commentOnly(rest) {
			return false
		}
		p.out = appendJSONString(p.out, s)
	case '{', '[':
		if len(v) < 2 || (v[1] != '}' && v[1] != ']') || v[1] != v[0]+2 || !commentOnly(v[2:]) {
			return false // a flow collection with content
		}
		p.out = append(p.out, v[:2]...)
	default:
		text, comment := cutComment(v)
		if !plainOK(text) || (text[0] == '-' && len(text) == 1) {
			return false
		}
		if !comment {
			var folded []byte
			for p.i < len(p.lines) && p.lines[p.i].indent > n && !p.gap[p.i] {
				next := p.lines[p.i].text
				if !plainOK(next) || next[0] == '-' || bytes.Contains(next, []byte(" #")) {
					return false
				}
				if folded == nil {
					folded = append([]byte(nil), text...)
				}
				folded = append(append(folded, ' '), next...)
				p.i++
			}
			if folded != nil {
				text = folded
			}
		}
		if !p.plain(text) {
			return false
		}
	}
	// Nothing may follow more indented: it would be a continuation the
	// fast path does not fold, or an error.
	return p.i >= len(p.lines) || p.lines[p.i].indent <= n
}

// splitKey cuts "key: rest" or "key:" into a key that is a plain or
// quoted string and the rest after the colon.
func splitKey(t []byte) ([]byte, []byte, bool) {
	if t[0] == '"' || t[0] == '\'' {
		s, rest, ok := quoted(t)
		if !ok || len(rest) == 0 || rest[0] != ':' || (len(rest) > 1 && rest[1] != ' ') || len(s) > 1000 || string(s) == "<<" {
			return nil, nil, false
		}
		return s, rest[1:], true
	}
	k := keyEnd(t)
	if k < 0 {
		return nil, nil, false
	}
	key := t[:k]
	if !plainOK(key) || key[len(key)-1] == ' ' || len(key) > 1000 || bytes.Contains(key, []byte(" #")) {
		return nil, nil, false
	}
	// Only keys yaml/v2 reads as strings: no bool, null, number, or
	// merge key.
	switch yamlHint(key[0]) {
	case 0:
		if string(key) == "<<" {
			return nil, nil, false
		}
	case 'M':
		if yamlSpecialWord(key) {
			return nil, nil, false
		}
	default:
		return nil, nil, false
	}
	return key, t[k+1:], true
}

// keyEnd is the index of the colon ending a plain key (followed by a
// blank or the end of the line), or -1.
func keyEnd(t []byte) int {
	for k := 0; k < len(t); k++ {
		if t[k] == ':' && (k+1 == len(t) || t[k+1] == ' ') {
			return k
		}
	}
	return -1
}

// isKeyLine tells whether t starts a mapping entry the fast path reads.
func isKeyLine(t []byte) bool {
	_, _, ok := splitKey(t)
	return ok
}

// plainOK tells whether t, one line of a plain scalar, is read by YAML
// as that text: no indicator first, no ": " inside, no colon last.
func plainOK(t []byte) bool {
	if len(t) == 0 {
		return false
	}
	switch t[0] {
	case '-':
		if len(t) > 1 && t[1] == ' ' {
			return false
		}
	case '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return false
	}
	return t[len(t)-1] != ':' && !bytes.Contains(t, []byte(": "))
}

// cutComment cuts a plain scalar's line at " #".
func cutComment(v []byte) ([]byte, bool) {
	if k := bytes.Index(v, []byte(" #")); k >= 0 {
		return bytes.TrimRight(v[:k], " "), true
	}
	return v, false
}

// commentOnly tells whether what follows a scalar on its line is nothing
// or a comment.
func commentOnly(rest []byte) bool {
	t := bytes.TrimLeft(rest, " ")
	return len(t) == 0 || (t[0] == '#' && len(t) < len(rest))
}

// quoted reads a one-line quoted scalar at the start of t: single quotes
// with a doubled quote for a quote, or double quotes without escapes.
func quoted(t []byte) ([]byte, []byte, bool) {
	q := t[0]
	if q == '"' {
		k := bytes.IndexByte(t[1:], '"')
		if k < 0 || bytes.IndexByte(t[1:1+k], '\\') >= 0 {
			return nil, nil, false
		}
		return t[1 : 1+k], t[2+k:], true
	}
	s := []byte{} // not nil: an empty string is a string
	for k := 1; k < len(t); k++ {
		if t[k] != '\'' {
			s = append(s, t[k])
			continue
		}
		if k+1 < len(t) && t[k+1] == '\'' {
			s = append(s, '\'')
			k++
			continue
		}
		return s, t[k+1:], true
	}
	return nil, nil, false
}

// yamlHint is yaml/v2's resolve table: 0 for a first byte that makes a
// plain scalar a string.
func yamlHint(c byte) byte {
	switch {
	case c == '+' || c == '-':
		return 'S'
	case c >= '0' && c <= '9':
		return 'D'
	case c == '.':
		return '.'
	}
	switch c {
	case 'y', 'Y', 'n', 'N', 't', 'T', 'f', 'F', 'o', 'O', '~':
		return 'M'
	}
	return 0
}

// yamlSpecialWord tells whether yaml/v2 reads the plain scalar t as a
// bool or null (its resolve map, for the words starting with a letter
// or ~).
func yamlSpecialWord(t []byte) bool {
	switch string(t) {
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF",
		"~", "null", "Null", "NULL":
		return true
	}
	return false
}

// plain appends the JSON of a plain scalar as yaml/v2 resolves it.
func (p *fastParser) plain(t []byte) bool {
	switch yamlHint(t[0]) {
	case 0:
		p.out = appendJSONString(p.out, t)
		return true
	case 'M':
		if !yamlSpecialWord(t) {
			p.out = appendJSONString(p.out, t)
			return true
		}
	case 'D':
		if decimal(t) {
			p.out = append(p.out, t...)
			return true
		}
	}
	js, ok := p.cache[string(t)]
	if !ok {
		js = resolvePlain(t)
		if len(p.cache) < fastScalarCacheSize {
			p.cache[string(t)] = js
		}
	}
	p.out = append(p.out, js...)
	return js != nil
}

// decimal tells whether t is a decimal integer yaml/v2 reads as itself:
// no sign, no leading zero, at most 18 digits.
func decimal(t []byte) bool {
	if len(t) > 18 || (t[0] == '0' && len(t) > 1) {
		return false
	}
	for _, c := range t {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// resolvePlain asks yaml/v2 what the plain scalar t is, in a mapping's
// value as the exact path reads it, and returns its JSON (nil when the
// answer is not one value the exact path would encode the same way).
func resolvePlain(t []byte) []byte {
	var m map[string]any
	if err := yamlv2.Unmarshal(append([]byte("v: "), t...), &m); err != nil || len(m) != 1 {
		return nil
	}
	v, ok := m["v"]
	if !ok {
		return nil
	}
	switch v.(type) {
	case nil, bool, int, int64, uint64, float64, string:
	default:
		return nil
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil // NaN and infinities: the exact path's error
	}
	return js
}

// appendJSONString appends s as a JSON string the way encoding/json
// writes it; s is printable ASCII (the fast path takes no other bytes),
// so only quotes, backslashes and the HTML characters are escaped.
func appendJSONString[S ~string | ~[]byte](out []byte, s S) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '<':
			out = append(out, `\u003c`...)
		case '>':
			out = append(out, `\u003e`...)
		case '&':
			out = append(out, `\u0026`...)
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}
