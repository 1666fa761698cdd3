package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strconv"
	"sync"

	yamlv2 "go.yaml.in/yaml/v2"
)

// Decoding documents ahead: at most maxDocsAhead documents, together
// below maxBytesAhead (one document of any allowed size is always taken),
// so memory stays bounded by a few documents, however large the input.
const (
	maxDocsAhead  = 64
	maxBytesAhead = 4 << 20
)

// decodedDoc is one document of a stream and what a worker made of it:
// JSON objects (a JSON document), or the JSON of a YAML document, or why
// neither.
type decodedDoc struct {
	raw     []byte
	readErr error // the splitter's, for this document
	blank   bool

	objs    []json.RawMessage
	isJSON  bool
	jsonErr error

	js  []byte
	err error // YAML: duplicate key, syntax, several values

	// parsed holds parseObject's answer for each of objs, or for js.
	parsed []*parsedObject

	done chan struct{}
}

// docDecoders decodes documents on a few goroutines. Results never depend
// on how many there are: each document is decoded alone, and the loader
// takes them in stream order.
type docDecoders struct {
	work chan *decodedDoc
	once sync.Once
}

func newDocDecoders() *docDecoders {
	d := &docDecoders{work: make(chan *decodedDoc, maxDocsAhead)}
	fast := fastYAML // read once: workers may outlive a failed load
	for range min(runtime.GOMAXPROCS(0), 4) {
		go func() {
			var cache scalarCache
			if fast {
				cache = scalarCache{}
			}
			for doc := range d.work {
				doc.decode(cache)
				close(doc.done)
			}
		}()
	}
	return d
}

// submit queues a document; one the splitter failed on, or a blank one,
// is done at once.
func (d *docDecoders) submit(raw []byte, readErr error) *decodedDoc {
	doc := &decodedDoc{raw: raw, readErr: readErr, done: make(chan struct{})}
	if readErr != nil || len(bytes.TrimSpace(raw)) == 0 {
		doc.blank = readErr == nil
		close(doc.done)
		return doc
	}
	d.work <- doc
	return doc
}

// stop lets the workers end once the queued documents are decoded.
func (d *docDecoders) stop() { d.once.Do(func() { close(d.work) }) }

// fastYAML lets documents of the common shapes take the fast path
// (fastyaml.go); tests turn it off to compare with the exact path.
var fastYAML = true

// decode reads one document; a nil cache turns the fast path off.
func (doc *decodedDoc) decode(cache scalarCache) {
	doc.objs, doc.isJSON, doc.jsonErr = jsonObjects(doc.raw)
	if doc.isJSON || doc.jsonErr != nil {
		for _, js := range doc.objs {
			doc.parsed = append(doc.parsed, parseObject(js))
		}
		return
	}
	if cache != nil {
		// The fast path's answer stands only for an object read without
		// error into a type drasat reads; anything else (an error, a
		// list, a kind skipped) is read again by the exact path, so that
		// messages and warnings are the exact path's.
		if js, meta, ok := fastYAMLToJSONMeta(doc.raw, cache); ok {
			// The typeMeta seen while parsing is encoding/json's for an
			// object that then decodes strictly: its keys are unique
			// and spelt exactly.
			if p := parseObjectMeta(js, meta); p.typed() {
				doc.js, doc.parsed = js, []*parsedObject{p}
				return
			}
		}
	}
	doc.js, doc.err = yamlDocToJSON(doc.raw)
	if doc.err == nil && string(doc.js) != "null" {
		doc.parsed = []*parsedObject{parseObject(doc.js)}
	}
}

// yamlDocToJSON converts one YAML document to JSON, parsing it once.
// Strict: a duplicate key is an error, not a silent merge (files
// concatenated without "---" would otherwise lose objects), and so is a
// second value in the document. The conversion is sigs.k8s.io/yaml's
// YAMLToJSONStrict (keys made strings the same way), without its second
// parse.
func yamlDocToJSON(raw []byte) ([]byte, error) {
	d := yamlv2.NewDecoder(bytes.NewReader(raw))
	d.SetStrict(true)
	var obj any
	if err := d.Decode(&obj); err != nil {
		if err == io.EOF {
			return []byte("null"), nil // comments only
		}
		return nil, duplicateKeyError(err)
	}
	var next struct{}
	if err := d.Decode(&next); err != io.EOF {
		return nil, errors.New(`more than one object or value in one document; separate objects with "---"`)
	}
	jsonable, err := toJSONable(obj)
	if err != nil {
		return nil, err
	}
	return json.Marshal(jsonable)
}

// toJSONable turns YAML's maps with any keys into JSON objects, as
// sigs.k8s.io/yaml's convertToJSONableObject does without a target type.
func toJSONable(v any) (any, error) {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			var key string
			switch k := k.(type) {
			case string:
				key = k
			case int:
				key = strconv.Itoa(k)
			case int64:
				key = strconv.FormatInt(k, 10)
			case float64:
				key = strconv.FormatFloat(k, 'g', -1, 32)
				switch key {
				case "+Inf":
					key = ".inf"
				case "-Inf":
					key = "-.inf"
				case "NaN":
					key = ".nan"
				}
			case bool:
				key = strconv.FormatBool(k)
			default:
				return nil, fmt.Errorf("unsupported map key of type: %s, key: %+#v, value: %+#v", reflect.TypeOf(k), k, e)
			}
			c, err := toJSONable(e)
			if err != nil {
				return nil, err
			}
			m[key] = c
		}
		return m, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := toJSONable(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	default:
		return v, nil
	}
}
