package plugin

import "strings"

// farRefusal is the far side's refusal of the request, as its reply said it. The far side says the
// same on its stderr ("oprov: ..."), which the error quotes: withoutRefusal leaves that line out,
// so that the refusal reads once.
type farRefusal struct{ msg string }

func (e *farRefusal) Error() string { return "the far side refused: " + quoteText(e.msg) }

// withoutRefusal drops from the far side's stderr tail the lines that repeat its refusal msg.
func withoutRefusal(tail, msg string) string {
	if msg == "" {
		return tail
	}
	var kept []string
	for _, line := range strings.Split(tail, "\n") {
		if !strings.Contains(line, msg) {
			kept = append(kept, line)
		}
	}
	return strings.TrimSpace(strings.Join(kept, "\n"))
}
