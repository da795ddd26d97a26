package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// What a value of each kind must look like, in the words every message
// about a bad value uses, whether it came from a flag or a variable.
const (
	wantBool     = "true or false"
	wantDuration = "a duration such as 30s or 2m"
	wantInt      = "an integer"
	wantUint     = "a whole number, 0 or more"
	wantNumber   = "a number"
	wantSize     = "a size such as 64MiB: bytes, or a number with KiB, MiB or GiB"
)

// parseFlags parses a command's arguments. It reports done when the
// command must not run, with the exit code: 0 after --help, which prints
// the command's help to stdout; 2 after a bad argument, which prints one
// line to stderr naming the flag and what it takes, and a pointer to
// --help, rather than the whole help the flag package would print.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	usage := fs.Usage
	if usage == nil {
		usage = func() {
			fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
	}
	// While parsing, the flag package's own messages are silenced and each
	// value records what it was given, so that the one line can say it.
	var bad *badValue
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	fs.VisitAll(func(f *flag.Flag) { f.Value = &recordingValue{Value: f.Value, name: f.Name, bad: &bad} })
	err := fs.Parse(args)
	fs.VisitAll(func(f *flag.Flag) { f.Value = f.Value.(*recordingValue).Value })
	fs.Usage = usage
	fs.SetOutput(stdout)

	hint := fmt.Sprintf(`(run "%s --help" for its flags)`, fs.Name())
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return 0, true
	case err != nil:
		fmt.Fprintf(stderr, "%s: %s %s\n", fs.Name(), describeParseError(err, bad), hint)
		return 2, true
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q %s\n", fs.Name(), fs.Arg(0), hint)
		return 2, true
	}
	return 0, false
}

// badValue is a value a flag refused.
type badValue struct {
	name, value, want string
}

// recordingValue wraps a flag's value while it is parsed, to record a
// value it refuses.
type recordingValue struct {
	flag.Value
	name string
	bad  **badValue
}

func (v *recordingValue) Set(s string) error {
	err := v.Value.Set(s)
	if err != nil {
		*v.bad = &badValue{name: v.name, value: s, want: wantOf(v.Value, err)}
	}
	return err
}

// IsBoolFlag keeps boolean flags usable without a value.
func (v *recordingValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// wantOf says what a flag's value must look like: a value type's own Want
// when it has one, the standard kinds by their Go type, and otherwise
// what its Set said.
func wantOf(v flag.Value, err error) string {
	if w, ok := v.(interface{ Want() string }); ok {
		return w.Want()
	}
	if g, ok := v.(flag.Getter); ok {
		switch g.Get().(type) {
		case bool:
			return wantBool
		case time.Duration:
			return wantDuration
		case int, int64:
			return wantInt
		case uint, uint64:
			return wantUint
		case float64:
			return wantNumber
		}
	}
	return err.Error()
}

// describeParseError is the flag package's error in the project's words,
// with flags written as they are documented, --name.
func describeParseError(err error, bad *badValue) string {
	if bad != nil {
		return fmt.Sprintf("--%s %q: want %s", bad.name, bad.value, bad.want)
	}
	msg := err.Error()
	for prefix, say := range map[string]string{
		"flag provided but not defined: -": "unknown flag --%s",
		"flag needs an argument: -":        "--%s needs a value",
	} {
		if name, ok := strings.CutPrefix(msg, prefix); ok {
			return fmt.Sprintf(say, strings.TrimLeft(name, "-"))
		}
	}
	return msg
}
