package input

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// docSplitter cuts a YAML stream into documents at "---" and "..." marker
// lines, as YAML does. Lines of any length are read whole (no line is
// dropped for filling a buffer), and a document stops being read as soon
// as it passes MaxDocBytes, so memory stays bounded by the largest
// document allowed, however large the input.
type docSplitter struct {
	r    *bufio.Reader
	done bool
	err  error // a bad marker line, reported with the document it starts
	// hint is the capacity a document starts with: a little more than
	// the last one's length. Streams repeat their kinds, so most
	// documents are read without growing (growing by doubling allocated
	// four times the file).
	hint int
}

func newDocSplitter(r io.Reader) *docSplitter {
	return &docSplitter{r: bufio.NewReaderSize(r, 64<<10)}
}

var errDocTooLarge = fmt.Errorf("larger than %d bytes", MaxDocBytes)

// next returns the next document (never nil; possibly blank) or io.EOF.
func (s *docSplitter) next() ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.done {
		return nil, io.EOF
	}
	doc := make([]byte, 0, s.hint)
	defer func() { s.hint = min(len(doc)+len(doc)/8+512, MaxDocBytes) }()
	for !s.done {
		start := len(doc)
		for {
			chunk, err := s.r.ReadSlice('\n')
			if len(doc)+len(chunk) > MaxDocBytes {
				return nil, errDocTooLarge
			}
			doc = append(doc, chunk...)
			if err == bufio.ErrBufferFull {
				continue // a long line: keep reading it
			}
			if err == io.EOF {
				s.done = true
				break
			}
			if err != nil {
				return nil, err
			}
			break
		}
		line := doc[start:]
		marker, err := documentMarker(line)
		if err != nil {
			if start > 0 {
				s.err = err
				return doc[:start], nil
			}
			return nil, err
		}
		if marker {
			doc = doc[:start]
			if len(doc) > 0 {
				return doc, nil
			}
		}
	}
	if len(doc) == 0 {
		return nil, io.EOF
	}
	return doc, nil
}

// documentMarker tells whether line starts or ends a document ("---" or
// "...", then only blanks or a comment). Content after a marker on the
// same line is an error, as in kubectl.
func documentMarker(line []byte) (bool, error) {
	if len(line) < 3 || !(bytes.HasPrefix(line, []byte("---")) || bytes.HasPrefix(line, []byte("..."))) {
		return false, nil
	}
	if len(line) > 3 && line[3] != ' ' && line[3] != '\t' && line[3] != '\r' && line[3] != '\n' {
		return false, nil // "----" or "...x": content, not a marker
	}
	rest := bytes.TrimSpace(line[3:])
	if len(rest) > 0 && rest[0] != '#' {
		return false, fmt.Errorf("content after %q on the same line: start the document on the next line", line[:3])
	}
	return true, nil
}

// jsonObjects decodes doc as a stream of JSON values (one object, or
// several one after another as `jq -c` prints them). It returns false
// when doc is not JSON at all, so that it is read as YAML instead. On an
// error, the values before the failing one are returned with it.
func jsonObjects(doc []byte) ([]json.RawMessage, bool, error) {
	t := bytes.TrimSpace(doc)
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
		return nil, false, nil
	}
	d := json.NewDecoder(bytes.NewReader(t))
	var out []json.RawMessage
	for {
		var v json.RawMessage
		err := d.Decode(&v)
		if err == io.EOF {
			return out, true, nil
		}
		if err != nil {
			if len(out) == 0 {
				return nil, false, nil // perhaps a YAML flow mapping: {name: a}
			}
			return out, true, err
		}
		if err := duplicateJSONKey(v); err != nil {
			return out, true, err
		}
		out = append(out, v)
	}
}

// duplicateJSONKey reports the first key set twice in one JSON object,
// which encoding/json would otherwise resolve silently (the last wins).
func duplicateJSONKey(js []byte) error {
	d := json.NewDecoder(bytes.NewReader(js))
	type frame struct {
		keys   map[string]bool // nil in an array
		path   string
		expect bool // next string token is a key
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				f := &frame{}
				if v == '{' {
					f.keys, f.expect = map[string]bool{}, true
				}
				stack = append(stack, f)
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.keys != nil && top.expect {
				if top.keys[v] {
					return fmt.Errorf("duplicate key %s", strconv.Quote(v))
				}
				top.keys[v] = true
				top.expect = false
				continue
			}
		}
		if len(stack) > 0 && stack[len(stack)-1].keys != nil {
			stack[len(stack)-1].expect = true
		}
	}
}
