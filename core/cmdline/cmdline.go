// Package cmdline splits a command line into argv the way a POSIX shell
// splits words, and writes argv back as a line that splits the same, so
// that users may type commands without any shell ever running them.
package cmdline

import (
	"errors"
	"strings"
)

// Split splits a command line into argv the way a POSIX shell splits
// words: blanks separate words, single quotes keep everything literal,
// double quotes keep blanks, a backslash escapes the next character. Nothing
// else a shell does (variables, globs, pipes) happens: the job's program
// receives exactly these words.
func Split(line string) ([]string, error) {
	var (
		args    []string
		cur     strings.Builder
		inWord  bool
		quote   rune
		escaped bool
	)
	for _, r := range line {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if escaped {
		return nil, errors.New("ends with a lone backslash")
	}
	if quote != 0 {
		return nil, errors.New("has an unclosed " + string(quote) + " quote")
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args, nil
}

// Join writes argv back as a command line Split reads the same.
func Join(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`!*?;&|<>(){}[]#~") {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}
