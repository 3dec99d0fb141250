package main

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the module's path, the prefix of its packages.
const module = "github.com/gpuportal/gpuportal/"

// TestDependencyRules checks the layout's rules (README.md, "Layout") on
// what each package may depend on, directly or not, as go list -deps sees
// it. A rule names packages by their path in the module; "x/..." is x and
// every package under it.
func TestDependencyRules(t *testing.T) {
	deps := moduleDeps(t)
	tests := []struct {
		name string
		pkgs string
		// forbid lists what the packages must not depend on.
		forbid []string
		// forbidStd lists the standard library packages they must not
		// depend on.
		forbidStd []string
		// only, when set, lists all they may depend on besides the
		// standard library.
		only []string
		// onlyModule, when set, lists all the packages of the module
		// they may depend on (others, such as the database drivers, are
		// not limited by it).
		onlyModule []string
	}{
		{name: "the engine drives machines through engine.Node, never an agent",
			pkgs: "core/engine", forbid: []string{"core/agent/...", "web/...", "models/...", "enginestore"}},
		{name: "the store knows neither the engine nor websockets",
			pkgs: "models", forbid: []string{"core/engine", "core/agent/...", "web/...", "github.com/gorilla/websocket"}},
		{name: "the store keeps rows: core values come from core/job and small leaves, adapters (enginestore, accountingstore, app) convert",
			pkgs: "models", onlyModule: []string{"core/job", "core/usage", "core/idle", "core/memest", "core/gpuhist", "core/synergy", "core/gpu"}},
		{name: "the scheduling core is pure: the standard library and core leaf packages",
			pkgs: "core/sched", only: []string{"core/job", "core/gpu", "core/memest", "core/lanes", "core/synergy", "core/usage"}},
		// golang.org/x/net/proxy is gorilla/websocket's own (its proxy
		// support), since the version client-go requires.
		{name: "core stands alone: core, websockets for the agent protocol, go-nvml for the NVML back end, pty for terminal sessions",
			pkgs: "core/...", only: []string{"core/...", "github.com/gorilla/websocket", "golang.org/x/net/proxy", "golang.org/x/net/internal/socks",
				"github.com/NVIDIA/go-nvml/...", "github.com/creack/pty"}},
		{name: "pseudo-terminals only in core/terminal, which the session's own process runs, never the agent",
			pkgs: "core/agent/...", forbid: []string{"github.com/creack/pty", "core/terminal"}},
		{name: "the server half of the agent protocol knows no web server or database",
			pkgs: "core/agent/hub", forbid: []string{"web/...", "models/...", "gorm.io/...", "github.com/labstack/..."}},
		{name: "the web server mounts the agents' endpoint without their implementation",
			pkgs: "web", forbid: []string{"core/agent", "core/agent/hub"}},
		{name: "the application layer knows no HTTP: web calls it, never the reverse",
			pkgs: "app/...", forbid: []string{"web/...", "templates", "github.com/labstack/...", "github.com/a-h/templ/..."},
			forbidStd: []string{"net/http"}},
		{name: "the application layer drives machines through its Engine interface: no agent, no engine store, no background writer",
			pkgs: "app/...", forbid: []string{"core/agent/...", "enginestore", "history", "live"}},
		{name: "the live publisher makes frames of telemetry: no web server, websocket, store or application layer",
			pkgs: "live", forbid: []string{"web/...", "app/...", "models/...", "history", "enginestore", "github.com/labstack/...", "github.com/gorilla/websocket"}},
		{name: "the history writer knows no web server, websocket or application layer",
			pkgs: "history", forbid: []string{"web/...", "app/...", "live", "enginestore", "github.com/labstack/...", "github.com/gorilla/websocket"}},
		{name: "the web server reads the history, never writes it: the server assembly starts the writer",
			pkgs: "web", forbid: []string{"history"}},
		{name: "the wire types stand alone: the CLI and any client use them without the server",
			pkgs: "api", forbid: []string{"web/...", "app/...", "models/...", "github.com/labstack/..."}},
		{name: "the command line is no web server: serve's assembly reaches it from package server, through main",
			pkgs: "cli", forbid: []string{"server", "web/...", "templates", "github.com/labstack/...", "github.com/a-h/templ/..."}},
		{name: "the simulator's command and its binary link the simulator alone, no store, server or cluster back end: gpuportal-sim starts as an empty program does",
			pkgs: "cli/simcmd", only: []string{"core/...", "github.com/spf13/cobra", "github.com/spf13/pflag"}},
		{name: "gpuportal-sim is the simulator's command alone",
			pkgs: "cmd/gpuportal-sim", only: []string{"cli/simcmd", "core/...", "github.com/spf13/cobra", "github.com/spf13/pflag"}},
		{name: "srun, which container jobs run in their images, links the agent's job code alone: no store, server or API client",
			pkgs: "cli/srun", onlyModule: []string{"core/..."}},
		{name: "gpuportal-srun is srun alone",
			pkgs: "cmd/gpuportal-srun", onlyModule: []string{"cli/srun", "core/..."}},
		{name: "the server assembly knows no command line: main wires it into cli's serve",
			pkgs: "server", forbid: []string{"cli", "github.com/spf13/cobra"}},
		{name: "the Go client of the REST API speaks it with the wire types only: no server part",
			pkgs: "client", forbid: []string{"web/...", "app/...", "models/...", "enginestore", "core/engine", "core/sched", "core/agent/...", "live", "history", "github.com/labstack/...", "gorm.io/..."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var checked int
			for pkg, ds := range deps {
				if !matches(tc.pkgs, pkg) {
					continue
				}
				checked++
				for _, d := range ds {
					if isStandard(d) {
						if slices.Contains(tc.forbidStd, d) {
							t.Errorf("%s depends on %s", strings.TrimPrefix(pkg, module), d)
						}
						continue
					}
					short, dep := strings.TrimPrefix(pkg, module), strings.TrimPrefix(d, module)
					if slices.ContainsFunc(tc.forbid, func(f string) bool { return matches(f, d) }) {
						t.Errorf("%s depends on %s", short, dep)
					}
					if tc.only != nil && !slices.ContainsFunc(tc.only, func(o string) bool { return matches(o, d) }) {
						t.Errorf("%s depends on %s, which is none of %v", short, dep, tc.only)
					}
					if tc.onlyModule != nil && strings.HasPrefix(d, module) && !slices.ContainsFunc(tc.onlyModule, func(o string) bool { return matches(o, d) }) {
						t.Errorf("%s depends on %s, which is none of %v", short, dep, tc.onlyModule)
					}
				}
			}
			if checked == 0 {
				t.Fatalf("no package matches %q", tc.pkgs)
			}
		})
	}
}

// TestSchedulingCoreTouchesNoSystem checks that no package of the
// module in the scheduling core's closure (core/sched and the leaves it
// imports) imports the operating system, processes, files or the
// network: the core is a function of its snapshot. The standard library
// itself reaches os (fmt does), so the check is on what the module's
// packages import, not on the whole closure.
func TestSchedulingCoreTouchesNoSystem(t *testing.T) {
	forbidden := []string{"os", "os/exec", "os/signal", "io/ioutil", "net", "net/http", "syscall", "path/filepath", "time/tzdata"}
	deps := moduleDeps(t)
	pkgs := []string{module + "core/sched"}
	for _, d := range deps[module+"core/sched"] {
		if strings.HasPrefix(d, module) {
			pkgs = append(pkgs, d)
		}
	}
	imports := moduleImports(t, pkgs)
	for _, pkg := range pkgs {
		for _, imp := range imports[pkg] {
			if slices.Contains(forbidden, imp) {
				t.Errorf("%s, in the scheduling core's closure, imports %s", strings.TrimPrefix(pkg, module), imp)
			}
		}
	}
	if len(imports) < 2 {
		t.Fatalf("imports of %v: got %d packages, want core/sched and its leaves", pkgs, len(imports))
	}
}

// TestWebGoesThroughApp checks that the web server imports, of the
// module's server side, the application layer and the wire types, never
// the store, the engine, the simulator or what the engine's figures come
// from: what a handler reads or changes, it asks app (go list, test files
// left out). app itself reaches the store and the engine, so the rule is
// on web's own imports, not on its closure.
func TestWebGoesThroughApp(t *testing.T) {
	forbid := []string{"models/...", "core/engine", "core/sim/...", "core/whatif", "core/forecast", "core/sched",
		"enginestore", "accountingstore"}
	imports := moduleImports(t, []string{module + "web"})
	var checked int
	for _, imp := range imports[module+"web"] {
		if !strings.HasPrefix(imp, module) {
			continue
		}
		checked++
		if slices.ContainsFunc(forbid, func(f string) bool { return matches(f, imp) }) {
			t.Errorf("web imports %s: ask package app", strings.TrimPrefix(imp, module))
		}
	}
	if !slices.Contains(imports[module+"web"], module+"app") || checked == 0 {
		t.Fatalf("web imports %v, not app", imports[module+"web"])
	}
}

// TestWebSeesNoRows checks that the web server holds no store row under
// another name: type-checked, web (test files left out) names no type,
// field, method, function or value of package models, and no expression
// of it has a models type, however it got there (an alias exported from
// app, a field of an app type, a function's result); and that no type
// app exports is an alias of a models type. What app hands web is api's
// values or app's own views (app/views.go).
func TestWebSeesNoRows(t *testing.T) {
	const models = module + "models"
	pkgs := typeCheck(t, module+"web", module+"app")
	web, app := pkgs[module+"web"], pkgs[module+"app"]
	fromModels := func(obj types.Object) bool { return obj != nil && obj.Pkg() != nil && obj.Pkg().Path() == models }
	var found int
	report := func(pos token.Pos, format string, args ...any) {
		if found++; found <= 40 {
			t.Errorf("%s: "+format, append([]any{web.fset.Position(pos)}, args...)...)
		}
	}
	for id, obj := range web.info.Uses {
		if fromModels(obj) {
			report(id.Pos(), "web uses models.%s: ask app for an api value or one of its views", obj.Name())
		}
	}
	for e, tv := range web.info.Types {
		if n := namedIn(tv.Type, models); n != nil {
			report(e.Pos(), "an expression of web has the store's type models.%s", n.Obj().Name())
		}
	}
	if found > 40 {
		t.Errorf("and %d more", found-40)
	}
	scope := app.pkg.Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || !tn.Exported() || !tn.IsAlias() {
			continue
		}
		if n := namedIn(tn.Type(), models); n != nil {
			t.Errorf("app.%s is models.%s under another name: make it app's own view (app/views.go)", name, n.Obj().Name())
		}
	}
	// Nor do app's functions, or the methods of its exported concrete
	// types, take or return a row: its store interfaces (what app asks of
	// the store) are the only place its exported API names one.
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		var sigs []*types.Func
		switch obj := obj.(type) {
		case *types.Func:
			sigs = append(sigs, obj)
		case *types.TypeName:
			if named, ok := obj.Type().(*types.Named); ok && !types.IsInterface(named) {
				for m := range named.Methods() {
					if m.Exported() {
						sigs = append(sigs, m)
					}
				}
			}
		}
		for _, fn := range sigs {
			sig := fn.Type().(*types.Signature)
			for _, tuple := range []*types.Tuple{sig.Params(), sig.Results()} {
				for v := range tuple.Variables() {
					if n := namedIn(v.Type(), models); n != nil {
						t.Errorf("app's %s takes or returns models.%s: give it app's own view or an api value", fn.FullName(), n.Obj().Name())
					}
				}
			}
		}
	}
	if len(web.info.Uses) == 0 || scope.Len() == 0 {
		t.Fatal("nothing type-checked")
	}
}

// TestOneGPUType checks that a GPU of the cluster has one type in the
// server's packages: gpu.Ref (core/gpu). No other struct of core, app,
// the store's adapters or the background writers declares a machine
// (Node string) and an index (Index int) side by side; one that needs a
// GPU holds a gpu.Ref. The wire types (api, the agent protocol) and the
// store's rows keep their own.
func TestOneGPUType(t *testing.T) {
	var files []string
	for _, pattern := range []string{"core/*/*.go", "core/*/*/*.go", "app/*.go", "enginestore/*.go", "accountingstore/*.go", "live/*.go", "history/*.go", "web/*.go"} {
		fs, err := filepath.Glob(filepath.Join("../..", pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	var checked int
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || strings.Contains(name, "/core/agent/wire/") || strings.HasSuffix(name, "/core/gpu/ref.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok {
				return true
			}
			var node, index bool
			for _, fl := range st.Fields.List {
				typ, _ := fl.Type.(*ast.Ident)
				for _, id := range fl.Names {
					node = node || (id.Name == "Node" && typ != nil && typ.Name == "string")
					index = index || (id.Name == "Index" && typ != nil && typ.Name == "int")
				}
			}
			if node && index {
				t.Errorf("%s: a struct with Node and Index: hold a gpu.Ref (core/gpu), the one GPU type", name)
			}
			return true
		})
	}
	if checked < 50 {
		t.Fatalf("checked %d files", checked)
	}
}

// namedIn returns the named type of package pkg that typ is, or points
// to, or holds as a slice's, array's, map's or channel's element; nil if
// none.
func namedIn(typ types.Type, pkg string) *types.Named {
	for {
		switch u := types.Unalias(typ).(type) {
		case *types.Pointer:
			typ = u.Elem()
		case *types.Slice:
			typ = u.Elem()
		case *types.Array:
			typ = u.Elem()
		case *types.Chan:
			typ = u.Elem()
		case *types.Map:
			if n := namedIn(u.Key(), pkg); n != nil {
				return n
			}
			typ = u.Elem()
		case *types.Named:
			if o := u.Obj(); o.Pkg() != nil && o.Pkg().Path() == pkg {
				return u
			}
			return nil
		default:
			return nil
		}
	}
}

// checked is a package type-checked from its source.
type checked struct {
	pkg  *types.Package
	info *types.Info
	fset *token.FileSet
}

// typeCheck type-checks pkgs from their source (test files left out),
// their imports from the compiler's export data (go list -export).
func typeCheck(t *testing.T, pkgs ...string) map[string]checked {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-json=ImportPath,Export,Dir,GoFiles"}, pkgs...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	type listed struct {
		ImportPath, Export, Dir string
		GoFiles                 []string
	}
	exports := make(map[string]string)
	var wanted []listed
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if slices.Contains(pkgs, p.ImportPath) {
			wanted = append(wanted, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, errors.New("no export data for " + path)
		}
		return os.Open(exports[path])
	})
	res := make(map[string]checked)
	for _, p := range wanted {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Uses: make(map[*ast.Ident]types.Object), Types: make(map[ast.Expr]types.TypeAndValue)}
		pkg, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info)
		if err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		res[p.ImportPath] = checked{pkg: pkg, info: info, fset: fset}
	}
	if len(res) != len(pkgs) {
		t.Fatalf("type-checked %d of %v", len(res), pkgs)
	}
	return res
}

// moduleImports returns what each of pkgs imports directly (test files
// left out).
func moduleImports(t *testing.T, pkgs []string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, pkgs...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	imports := make(map[string][]string)
	for line := range strings.Lines(string(out)) {
		if fields := strings.Fields(line); len(fields) > 0 {
			imports[fields[0]] = fields[1:]
		}
	}
	return imports
}

// TestMainOnlyWires checks that the binary's main package imports, of
// the module, only the command line and the server assembly.
func TestMainOnlyWires(t *testing.T) {
	imports := moduleImports(t, []string{module + "cmd/gpuportal"})
	var checked int
	for _, imp := range imports[module+"cmd/gpuportal"] {
		if !strings.HasPrefix(imp, module) {
			continue
		}
		checked++
		if imp != module+"cli" && imp != module+"server" {
			t.Errorf("cmd/gpuportal imports %s: main only wires cli and server", strings.TrimPrefix(imp, module))
		}
	}
	if checked == 0 {
		t.Fatal("cmd/gpuportal imports neither cli nor server")
	}
}

// TestCLIUsesClient checks that the command line calls the REST API
// through package client only: of package cli's files, none but the agent
// (agent*.go, which checks a server's /readyz) makes an HTTP request or
// names an /api/v1 route.
func TestCLIUsesClient(t *testing.T) {
	files, err := filepath.Glob("../../cli/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var checked int
	for _, name := range files {
		if base := filepath.Base(name); strings.HasPrefix(base, "agent") || strings.HasSuffix(base, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind == token.STRING && strings.Contains(n.Value, "/api/v1/") && !strings.Contains(n.Value, "curl") {
					t.Errorf("%s names the route %s: call it through package client", name, n.Value)
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "http" && slices.Contains([]string{"NewRequest", "NewRequestWithContext", "Get", "Post", "PostForm", "Head"}, n.Sel.Name) {
					t.Errorf("%s calls http.%s: call the API through package client", name, n.Sel.Name)
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no file of the CLI checked")
	}
}

// moduleDeps returns every package of the module with its dependencies,
// direct or not, as go list sees them (test files left out).
func moduleDeps(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", module+"...")
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	deps := make(map[string][]string)
	for line := range strings.Lines(string(out)) {
		if fields := strings.Fields(line); len(fields) > 0 {
			deps[fields[0]] = fields[1:]
		}
	}
	return deps
}

// matches reports whether pkg is pattern, or under it for "x/...". A
// pattern whose first element has no dot is a path in the module.
func matches(pattern, pkg string) bool {
	if !hasDomain(pattern) {
		pattern = module + pattern
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// isStandard reports whether pkg is in the standard library.
func isStandard(pkg string) bool { return !hasDomain(pkg) }

// hasDomain reports whether path starts with a domain name, as every
// import path outside the standard library does.
func hasDomain(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return strings.Contains(first, ".")
}
