package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"sheetq/internal/datadir"
)

// notInFile are the serve flags the config file cannot set: where it is, and the data
// directory it defaults into, are known before it is read; tokens go in [[tokens]].
var notInFile = map[string]string{
	"config": "it is the config file's own location",
	"data":   "the config file's default location depends on it",
	"token":  "use [[tokens]] name = \"...\" token = \"...\" instead",
}

// applyFileFlags sets, from the config file's [serve] table, every flag that neither the
// command line nor SHEETQ_* set (parseWithEnv has run, so Visit sees both). Keys are
// flag names with '_' for '-'; an unknown key is an error, like elsewhere in the file.
// It returns the names of the flags it set, so that a value the command checks later
// can be blamed on the file and its key (fileFlags.bad).
func applyFileFlags(fs *flag.FlagSet, values map[string]any, path string) (fileFlags, error) {
	fromFile := fileFlags{fs: fs, path: path, names: map[string]bool{}}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		name := strings.ReplaceAll(key, "_", "-")
		if why, ok := notInFile[name]; ok {
			return fromFile, fmt.Errorf("config %s: [serve] %s cannot be set in the config file: %s", path, key, why)
		}
		if fs.Lookup(name) == nil || strings.Contains(key, "-") {
			return fromFile, fmt.Errorf("config %s: unknown key serve.%s", path, key)
		}
		if set[name] {
			continue
		}
		var v string
		switch x := values[key].(type) {
		case string:
			v = x
		case int64, float64, bool:
			v = fmt.Sprint(x)
		case []any: // a list, such as trusted_proxies = ["10.0.0.0/8", "192.168.0.0/16"]
			parts := make([]string, 0, len(x))
			for _, e := range x {
				parts = append(parts, fmt.Sprint(e))
			}
			v = strings.Join(parts, ",")
		default:
			return fromFile, fmt.Errorf("config %s: serve.%s: want a string, number, boolean or list", path, key)
		}
		if err := fs.Set(name, v); err != nil {
			return fromFile, fmt.Errorf("config %s: serve.%s = %q: %w", path, key, v, err)
		}
		fromFile.names[name] = true
	}
	return fromFile, nil
}

// fileFlags are the flags the config file's [serve] table set, in fs.
type fileFlags struct {
	fs    *flag.FlagSet
	path  string
	names map[string]bool
}

// bad is the error for a flag's value that the command refuses after parsing: a usage
// error (exit 2, "--workers must be ...", led by the variable when SHEETQ_WORKERS set
// it) when it came from the command line or the environment, and the config file's
// error (exit 1, naming the file and key) when the file set it.
func (f fileFlags) bad(name, rule string) error {
	sep := " "
	if strings.HasPrefix(rule, ":") {
		sep = "" // a parser's own message: "--check-db: ..."
	}
	if f.names[name] {
		return fmt.Errorf("config %s: [serve] %s%s%s", f.path, strings.ReplaceAll(name, "-", "_"), sep, rule)
	}
	return blameEnv(f.fs, usageError{fmt.Errorf("--%s%s%s", name, sep, rule)}, name)
}

// blameAny is the error for a rule that ties several flags together (err names them as
// flags: "stale-after ... the heartbeat"): the config file's, naming its keys, when the
// file set any of them, else a usage error, led by a variable that set one of them.
func (f fileFlags) blameAny(err error, names ...string) error {
	for _, name := range names {
		if f.names[name] {
			msg := err.Error()
			for _, n := range names {
				msg = strings.ReplaceAll(msg, n, strings.ReplaceAll(n, "-", "_"))
			}
			return fmt.Errorf("config %s: [serve] %s", f.path, msg)
		}
	}
	return blameEnv(f.fs, usageError{err}, names...)
}

// parseWithEnv parses args, then fills every flag not given on the command line from
// SHEETQ_<NAME> (dashes become underscores), so flags beat the environment.
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	if err := parseQuiet(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := "SHEETQ_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = usageError{fmt.Errorf("%s=%q: %w", env, v, e)}
				return
			}
			f.Value = &envValue{Value: f.Value, env: env, raw: v}
		}
	})
	return err
}

// envValue is the value of a flag that parseWithEnv set from the environment: it
// remembers the variable, so that a command's own checks of the value after parsing
// can name it (blameEnv), as the parse error above does.
type envValue struct {
	flag.Value
	env, raw string // env is "" once something else sets the flag
}

// Set is the command line's, when a command parses again after parseWithEnv (backup's
// FILE between flags): the value no longer comes from the environment.
func (v *envValue) Set(s string) error {
	v.env = ""
	return v.Value.Set(s)
}

// IsBoolFlag keeps a boolean flag one that a later parse takes without a value.
func (v *envValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// secretFlags may hold a password (a postgres:// URL's) or a token: an error names
// their variable without its value, which would end up in a terminal's scrollback or
// a CI log.
var secretFlags = map[string]bool{"store": true, "to": true, "token": true}

// fromEnv is `SHEETQ_NAME="value"` (the variable alone for secretFlags) when
// parseWithEnv set flag name from the environment, else "".
func fromEnv(fs *flag.FlagSet, name string) string {
	if fs == nil {
		return ""
	}
	f := fs.Lookup(name)
	if f == nil {
		return ""
	}
	v, ok := f.Value.(*envValue)
	switch {
	case !ok || v.env == "":
		return ""
	case secretFlags[name]:
		return v.env
	}
	return fmt.Sprintf("%s=%q", v.env, v.raw)
}

// blameEnv is err, a command's refusal of the value of one of the named flags, led by
// the variable that set it when the environment did: SHEETQ_LIMIT="0": --limit must
// be ... tells a user who never typed --limit where the 0 came from. err's exit
// status is kept.
func blameEnv(fs *flag.FlagSet, err error, names ...string) error {
	for _, name := range names {
		if src := fromEnv(fs, name); src != "" {
			return fmt.Errorf("%s: %w", src, err)
		}
	}
	return err
}

// parseArgs parses flags that may come before, between or after the positional
// arguments (`export demo -p rows=5 --wait`), then SHEETQ_* for the flags not given.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseQuiet(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		// A "--" ends the flags: everything after it is positional.
		if len(args) > 0 && len(fs.Args()) < len(args) && args[len(args)-len(fs.Args())-1] == "--" {
			pos = append(pos, fs.Args()...)
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return pos, parseWithEnv(fs, nil)
}

// parseQuiet is fs.Parse without the flag package's own reporting, which prints a bad
// flag's error, then the whole usage text, then (through Exit) the error again: a bad
// flag is one line, "sheetq: <error> (see sheetq <command> --help)", exit 2. -h and
// --help still print the usage.
func parseQuiet(fs *flag.FlagSet, args []string) error {
	explainValues(fs)
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		if usage != nil {
			usage()
		} else {
			printFlags(out, fs)
		}
		return err
	default:
		msg := longFlag.ReplaceAllString(err.Error(), "flag --$1")
		return usageError{fmt.Errorf("%s (see sheetq %s --help)", msg, fs.Name())}
	}
}

// explained is a flag's value whose refusal says what the flag wants, where the flag
// package's own types say only "parse error": SHEETQ_WORKERS="abc": want a whole
// number from 1 to 256; invalid value "5" for flag --heartbeat: want a duration, such
// as 30s, 5m or 1h30m.
type explained struct {
	flag.Value
	want string
}

// Set is the wrapped value's, refusing with what the flag wants.
func (v *explained) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return errors.New("want " + v.want)
	}
	return nil
}

// IsBoolFlag keeps a boolean flag one that takes no value.
func (v *explained) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// explainValues wraps, in explained, each value of fs of the flag package's own types
// that can refuse a value (numbers, durations, booleans), with what its type wants;
// a flag that wantRange already explained keeps its words.
func explainValues(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.HasPrefix(fmt.Sprintf("%T", f.Value), "*flag.") {
			return // explained, parseWithEnv's envValue, or a command's own Func
		}
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		want := ""
		switch g.Get().(type) {
		case int, int64:
			want = "a whole number"
		case uint, uint64:
			want = "a whole number, 0 or more"
		case float64:
			want = "a number"
		case time.Duration:
			want = "a duration, such as 30s, 5m or 1h30m"
		case bool:
			want = "true or false"
		default:
			return
		}
		f.Value = &explained{Value: f.Value, want: want}
	})
}

// intRange is the range of a whole-number flag, said once for both of its checks: the
// refusal of a value that is no number (wantRange) and the command's check of the
// number (rule).
type intRange struct{ min, max int }

// holds reports whether n is in r.
func (r intRange) holds(n int) bool { return n >= r.min && n <= r.max }

// rule is the command's words for a number out of r: "must be from 1 to 256".
func (r intRange) rule() string { return fmt.Sprintf("must be from %d to %d", r.min, r.max) }

// wantRange makes fs's whole-number flag name refuse a value that is no number with r:
// "want a whole number from 1 to 256". The command checks the range itself, after
// parsing, so that a number out of range is blamed on the config file's key when the
// file set it (fileFlags.bad).
func wantRange(fs *flag.FlagSet, name string, r intRange) {
	f := fs.Lookup(name)
	f.Value = &explained{Value: f.Value, want: fmt.Sprintf("a whole number from %d to %d", r.min, r.max)}
}

// longFlag is a multi-letter flag as the flag package's errors name it ("flag -limit").
var longFlag = regexp.MustCompile(`flag -([A-Za-z0-9][-A-Za-z0-9_]+)`)

// printFlags replaces flag.PrintDefaults: the same listing, with each flag written
// with two dashes (one-letter flags with one) as docs/cli.md writes them ("  --name value\n    \tusage"); Go's flag
// package accepts both.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if len(f.Name) == 1 {
			line = "  -" + f.Name // -p and -o, as docs/cli.md writes them
		}
		if name != "" {
			line += " " + name
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		switch def := f.DefValue; {
		case def == "" || def == "false" || def == "0" || def == "0s" || def == "[]":
			// a zero default goes unsaid, as flag.PrintDefaults leaves it
		case fmt.Sprintf("%T", unwrapValue(f.Value)) == "*flag.stringValue":
			line += fmt.Sprintf(" (default %q)", def)
		default:
			line += " (default " + def + ")"
		}
		fmt.Fprintln(w, line)
	})
}

// unwrapValue is v as the flag package made it, without parseWithEnv's envValue or
// explainValues' explained.
func unwrapValue(v flag.Value) flag.Value {
	for {
		switch w := v.(type) {
		case *envValue:
			v = w.Value
		case *explained:
			v = w.Value
		default:
			return v
		}
	}
}

// dataRoot is the data directory a command works on: the --data value, or the user's
// data folder.
func dataRoot(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	return datadir.Default()
}
