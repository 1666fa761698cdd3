package scalegen

import (
	"bufio"
	"io"

	"github.com/drasat/drasat/input"
	"sigs.k8s.io/yaml"
)

// WriteYAML writes the objects as a multi-document YAML stream, one object
// at a time: Nodes, classes, slices, claims, pods.
func WriteYAML(w io.Writer, objs *input.Objects) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var docs []any
	for _, o := range objs.Nodes {
		docs = append(docs, o)
	}
	for _, o := range objs.Classes {
		docs = append(docs, o)
	}
	for _, o := range objs.Slices {
		docs = append(docs, o)
	}
	for _, o := range objs.Claims {
		docs = append(docs, o)
	}
	for _, o := range objs.Pods {
		docs = append(docs, o)
	}
	for i, d := range docs {
		y, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		if i > 0 {
			bw.WriteString("---\n")
		}
		bw.Write(y)
	}
	return bw.Flush()
}
