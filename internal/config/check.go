package config

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadAll is Load that reports every bad key and value of the file, not
// only the first: each is an *Error (fanoutd: config: <key>: …), an unknown
// key with the nearest known key suggested. It finds them by taking each
// bad key out of the document and resolving the rest again.
func LoadAll(path string, getenv func(string) string) (*Config, []error) {
	var data []byte
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, []error{&Error{Key: "(file)", Msg: err.Error()}}
		}
		data = b
	}
	cfg, first := Parse(data, getenv)
	if first == nil {
		return cfg, nil
	}
	err := first
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return nil, []error{first} // not YAML: one error, as Parse said
	}
	var errs []error
	var deleted []string
	// cascade reports whether key's error comes of a key taken out: the
	// key itself, now absent, or one below it (tokens[0]: set sha256 or
	// token, once tokens[0].sha256 is out).
	cascade := func(key string) bool {
		for _, d := range deleted {
			if d == key || strings.HasPrefix(d, key+".") || strings.HasPrefix(d, key+"[") {
				return true
			}
		}
		return false
	}
	// The decoder reports every unknown key and type mismatch at once.
	fc := fileConfig{ClaimCheck: newClaimCheckFile()}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var te *yaml.TypeError
	if derr := dec.Decode(&fc); errors.As(derr, &te) {
		for i, msg := range te.Errors {
			e := first // Parse named the first already
			if i > 0 {
				e = yamlError(data, errors.New(msg))
			}
			errs = append(errs, e)
			var ce *Error
			if !errors.As(e, &ce) || !deleteKey(&root, ce.Key) {
				return nil, reported(errs) // a value the document cannot lose: the rest unresolved
			}
			deleted = append(deleted, ce.Key)
		}
	}
	for range 1000 { // each round takes a key out: a bound, never reached
		b, merr := yaml.Marshal(&root)
		if merr != nil {
			break
		}
		if _, err = Parse(b, getenv); err == nil {
			break
		}
		var ce *Error
		isKey := errors.As(err, &ce)
		if !isKey || !cascade(ce.Key) {
			errs = append(errs, err)
		}
		if !isKey || !deleteKey(&root, ce.Key) {
			break // not a key of the file (the environment, a key's absence)
		}
		deleted = append(deleted, ce.Key)
	}
	if len(errs) == 0 {
		errs = append(errs, first)
	}
	return nil, reported(errs)
}

// maxReported bounds the errors LoadAll returns: a hostile document (an
// alias bomb) repeats one error as often as it expands.
const maxReported = 50

// reported drops repeated errors and keeps at most maxReported, saying how
// many more there were.
func reported(errs []error) []error {
	seen := map[string]bool{}
	var out []error
	more := 0
	for _, e := range errs {
		switch {
		case seen[e.Error()]:
		case len(out) == maxReported:
			more++
		default:
			seen[e.Error()] = true
			out = append(out, e)
		}
	}
	if more > 0 {
		out = append(out, &Error{Key: "(document)", Msg: strconv.Itoa(more) + " more errors not shown"})
	}
	return out
}

// deleteKey removes the dotted key (a.b[2].c) from the document; false if
// it is not there.
func deleteKey(n *yaml.Node, key string) bool {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return false
		}
		n = n.Content[0]
	}
	parts := strings.Split(key, ".")
	for i, p := range parts {
		name, idx := p, -1
		if j := strings.IndexByte(p, '['); j >= 0 && strings.HasSuffix(p, "]") {
			var err error
			name = p[:j]
			if idx, err = strconv.Atoi(p[j+1 : len(p)-1]); err != nil {
				return false // a list inside a list: no key of ours
			}
		}
		if n.Kind != yaml.MappingNode {
			return false
		}
		k := -1
		for m := 0; m+1 < len(n.Content); m += 2 {
			if n.Content[m].Value == name {
				k = m
			}
		}
		if k < 0 {
			return false
		}
		last := i == len(parts)-1
		if last && idx < 0 {
			n.Content = append(n.Content[:k], n.Content[k+2:]...)
			return true
		}
		n = n.Content[k+1]
		if idx >= 0 {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return false
			}
			if last {
				n.Content = append(n.Content[:idx], n.Content[idx+1:]...)
				return true
			}
			n = n.Content[idx]
		}
	}
	return false
}

// KnownKeys returns the keys the document accepts under the dotted path
// (venues.<name>, tokens[0], "" for the top level), from the file's
// structure: a key added there is known here.
func KnownKeys(path string) []string {
	t := reflect.TypeOf(fileConfig{})
	if path != "" {
		for _, p := range strings.Split(path, ".") {
			if j := strings.IndexByte(p, '['); j >= 0 {
				p = p[:j]
			}
			t = fieldType(deref(t), p)
			if t == nil {
				return nil
			}
			for t = deref(t); t.Kind() == reflect.Slice; t = deref(t.Elem()) {
			}
		}
	}
	return structKeys(deref(t))
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fieldType is the type of key under t: a struct field's, a map's value.
func fieldType(t reflect.Type, key string) reflect.Type {
	switch t.Kind() {
	case reflect.Map:
		return t.Elem()
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if strings.Contains(opts, "inline") {
				if ft := fieldType(deref(f.Type), key); ft != nil {
					return ft
				}
				continue
			}
			if name == key {
				return f.Type
			}
		}
	}
	return nil
}

func structKeys(t reflect.Type) []string {
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case strings.Contains(opts, "inline"):
			out = append(out, structKeys(deref(f.Type))...)
		case name != "" && name != "-":
			out = append(out, name)
		}
	}
	return out
}

// suggest returns the known key nearest to the unknown dotted key, or "".
func suggest(key string) string {
	parent, name := "", key
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		parent, name = key[:i], key[i+1:]
	}
	best, bestD := "", len(name)/3+2
	for _, k := range KnownKeys(parent) {
		if d := distance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Keys returns every key the document takes, as dotted paths: a map's
// keys as <name> (venues.<name>.depth), a list's elements as []
// (tokens[].name); a section (websocket) is not a key of its own, a list
// or a map (tokens, venues) is. It reads the file's structure, so a key
// added there is listed.
func Keys() []string { return keysOf(reflect.TypeOf(fileConfig{}), "") }

func keysOf(t reflect.Type, prefix string) []string {
	var out []string
	t = deref(t)
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			out = append(out, keysOf(f.Type, prefix)...)
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		key := prefix + name
		ft := deref(f.Type)
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, keysOf(ft, key+".")...)
		case ft.Kind() == reflect.Map && deref(ft.Elem()).Kind() == reflect.Struct:
			out = append(out, key)
			out = append(out, keysOf(ft.Elem(), key+".<name>.")...)
		case ft.Kind() == reflect.Slice && deref(ft.Elem()).Kind() == reflect.Struct:
			out = append(out, key)
			out = append(out, keysOf(ft.Elem(), key+"[].")...)
		default:
			out = append(out, key)
		}
	}
	return out
}
