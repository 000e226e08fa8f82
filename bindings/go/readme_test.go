package redlock_test

// README.md's Go code cannot drift from code that runs: every ```go block must be, byte for
// byte after trimming, the body of a function of this package's tests that `go test` runs —
// an Example with an output comment, a Test, or one of readmeSnippets, which
// TestReadmeSnippets runs against the test servers.

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// codeBlock is one fenced code block of a Markdown file.
type codeBlock struct {
	line int // of the opening fence, from 1
	code string
}

// goBlocks returns the Go blocks of a Markdown file, in order: those whose fence's language
// tag is go or golang, in any case and spacing ("```go", "``` Go", "```golang"), so that no
// block escapes the check by its spelling. A block left open is an error.
func goBlocks(path string) ([]codeBlock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		blocks []codeBlock
		open   bool // inside a block
		isGo   bool // of Go
		start  int
		body   []string
		lineNo int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lineNo++
		line := strings.TrimRight(sc.Text(), " \t")
		tag, fence := strings.CutPrefix(strings.TrimLeft(line, " "), "```")
		switch {
		case open && fence:
			if isGo {
				blocks = append(blocks, codeBlock{line: start, code: strings.Join(body, "\n")})
			}
			open, body = false, nil
		case open:
			body = append(body, line)
		case fence:
			lang := strings.ToLower(strings.Fields(tag + " -")[0])
			open, isGo, start = true, lang == "go" || lang == "golang", lineNo
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if open {
		return nil, fmt.Errorf("%s:%d: code block never closed", path, start)
	}
	return blocks, nil
}

// testFunc is a function of the package's test files, with its body as a README block would
// show it: without the braces and one level of indentation, trimmed.
type testFunc struct {
	name, file string
	body       string
	runs       string // how go test runs it, "" if it does not
}

// packageTestFuncs parses the test files of this package that this platform compiles.
func packageTestFuncs(t *testing.T) []testFunc {
	t.Helper()
	snippets := map[string]bool{}
	for _, f := range readmeSnippets {
		snippets[funcName(f)] = true
	}
	names, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var (
		funcs []testFunc
		files []*ast.File
	)
	for _, name := range names {
		if ok, err := build.Default.MatchFile(".", name); err != nil || !ok {
			continue // not compiled here (another platform, a build tag)
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Recv != nil {
				continue
			}
			body := src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset]
			tf := testFunc{name: fn.Name.Name, file: name, body: dedent(string(body))}
			switch {
			case snippets[tf.name]:
				tf.runs = "TestReadmeSnippets"
			case strings.HasPrefix(tf.name, "Test") && isTestSignature(fn):
				tf.runs = "go test"
			}
			funcs = append(funcs, tf)
		}
	}
	// An Example runs only with an output comment (doc.Examples reads them as go test does).
	run := map[string]bool{}
	for _, ex := range doc.Examples(files...) {
		if ex.Output != "" || ex.EmptyOutput {
			run["Example"+ex.Name] = true
		}
	}
	for i := range funcs {
		if run[funcs[i].name] {
			funcs[i].runs = "go test (an Example with output)"
		}
	}
	return funcs
}

func isTestSignature(fn *ast.FuncDecl) bool {
	p := fn.Type.Params.List
	if len(p) != 1 || fn.Type.Results != nil {
		return false
	}
	star, ok := p[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "T"
}

// dedent removes one tab from the start of every line, and trims the result.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func funcName(f any) string {
	name := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
	return name[strings.LastIndexByte(name, '.')+1:]
}

// Every ```go block of README.md is the body of a function go test runs, and every function
// of readmeSnippets is shown in the README.
func TestReadmeBlocks(t *testing.T) {
	blocks, err := goBlocks("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block: is the parser broken?")
	}
	funcs := packageTestFuncs(t)
	shown := map[string]bool{}
	for _, b := range blocks {
		code := strings.TrimSpace(b.code)
		var matched []testFunc
		for _, f := range funcs {
			if f.body == code {
				matched = append(matched, f)
			}
		}
		ran := false
		for _, f := range matched {
			if f.runs != "" {
				ran = true
				shown[f.name] = true
			}
		}
		switch {
		case len(matched) == 0:
			t.Errorf("README.md:%d: this ```go block is not the body of any function in the package's tests. "+
				"Make it the body of a readmeSnippets function (readme_snippets_test.go), a Test, or an Example "+
				"with an output comment, and copy the body back byte for byte:\n%s", b.line, code)
		case !ran:
			t.Errorf("README.md:%d: this ```go block is the body of %s (%s), which go test never runs",
				b.line, matched[0].name, matched[0].file)
		}
	}
	for _, f := range readmeSnippets {
		if name := funcName(f); !shown[name] {
			t.Errorf("readmeSnippets has %s, which no ```go block of README.md shows", name)
		}
	}
}

// The checker itself: it sees through look-alike fences, and tells a block that matches
// nothing from one that matches.
func TestReadmeBlocksParser(t *testing.T) {
	dir := t.TempDir()
	write := func(md string) string {
		p := filepath.Join(dir, "x.md")
		if err := os.WriteFile(p, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	blocks, err := goBlocks(write("a\n```go\nx := 1\n\n\ty()\n```\n```sh\nls\n```\n  ```go\nz()\n  ```\n"))
	if err != nil || len(blocks) != 2 || blocks[0].code != "x := 1\n\n\ty()" || blocks[0].line != 2 ||
		blocks[1].code != "z()" {
		t.Fatalf("goBlocks: %+v, %v", blocks, err)
	}
	for _, spelling := range []string{"```golang", "```Go", "``` go", "```go title=x"} {
		blocks, err := goBlocks(write(spelling + "\nx\n```\n"))
		if err != nil || len(blocks) != 1 || blocks[0].code != "x" {
			t.Errorf("goBlocks missed a block opened with %q: %+v, %v", spelling, blocks, err)
		}
	}
	if _, err := goBlocks(write("```go\nx\n")); err == nil {
		t.Error("goBlocks accepted a block left open")
	}
	if got := dedent("\n\tif x {\n\t\ty()\n\t}\n"); got != "if x {\n\ty()\n}" {
		t.Fatalf("dedent: %q", got)
	}
}

// readmeArgs gives a README snippet's parameters by their type, and checks afterwards what the
// snippet was to set up.
func readmeArgs(t *testing.T, typ reflect.Type) (reflect.Value, func()) {
	switch typ {
	case reflect.TypeOf([]string(nil)):
		return reflect.ValueOf(sharedNodes), nil
	case reflect.TypeOf((*redlock.Manager)(nil)):
		return reflect.ValueOf(newManager(t, sharedNodes)), nil
	case reflect.TypeOf(tlsNodes(nil)):
		return reflect.ValueOf(tlsNodes(urls(startTLSCluster(t, 3, testTLS(t, true))))), nil
	case reflect.TypeOf(tlsPEM{}):
		s := testTLS(t, true)
		return reflect.ValueOf(tlsPEM{CA: s.ca, Cert: s.clientCert, Key: s.clientKey}), nil
	case reflect.TypeOf((<-chan struct{})(nil)):
		done := make(chan struct{})
		close(done) // the work is done at once
		return reflect.ValueOf((<-chan struct{})(done)), nil
	case reflect.TypeOf((*http.ServeMux)(nil)):
		mux := http.NewServeMux()
		return reflect.ValueOf(mux), func() {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "# TYPE redlock_acquire_total") {
				t.Fatalf("GET /metrics: %d %q", rec.Code, tail(rec.Body.String(), 200))
			}
		}
	}
	t.Fatalf("readmeArgs: no value for a parameter of type %v: add one", typ)
	return reflect.Value{}, nil
}

// Every README snippet runs without error against the test servers. The log output they make
// is kept in the test's log. (Not parallel: it redirects the standard logger, which only runs
// before the parallel tests do.)
func TestReadmeSnippets(t *testing.T) {
	var logged bytes.Buffer
	log.SetOutput(&logged)
	defer log.SetOutput(os.Stderr)
	errType := reflect.TypeOf((*error)(nil)).Elem()
	for _, f := range readmeSnippets {
		t.Run(funcName(f), func(t *testing.T) {
			v := reflect.ValueOf(f)
			typ := v.Type()
			if typ.NumOut() != 1 || typ.Out(0) != errType {
				t.Fatalf("%v: a README snippet returns error only", typ)
			}
			args := make([]reflect.Value, typ.NumIn())
			var after []func()
			for i := range args {
				var check func()
				args[i], check = readmeArgs(t, typ.In(i))
				if check != nil {
					after = append(after, check)
				}
			}
			logged.Reset()
			out := v.Call(args)[0]
			if s := logged.String(); s != "" {
				t.Log("logged: " + s)
			}
			if err, _ := out.Interface().(error); err != nil {
				t.Fatalf("returned %v", err)
			}
			for _, check := range after {
				check()
			}
		})
	}
}
