package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// readLine reads one line from In, without its line ending, and no byte past it (a password read
// next must still be there).
func (s *IOStreams) readLine() (string, error) {
	var line []byte
	b := make([]byte, 1)
	for {
		n, err := s.In.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			line = append(line, b[0])
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			break
		}
		if err != nil {
			return "", err
		}
	}
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return string(line), nil
}

// readPassword prompts on ErrOut and reads a password from In: without echo when In is a
// terminal, else one line as it comes.
func (s *IOStreams) readPassword(prompt string) ([]byte, error) {
	fmt.Fprint(s.ErrOut, prompt)
	defer fmt.Fprintln(s.ErrOut)
	if f, ok := s.In.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return term.ReadPassword(int(f.Fd()))
	}
	line, err := s.readLine()
	return []byte(line), err
}
