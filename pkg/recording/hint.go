package recording

// differsHint is the last sentence of a refusal whose first difference is at attribute attr of
// type typ: what the user can do, in the flags of the command that replays. oprov run --replay
// can leave the attribute out of the comparison; provider check --json cannot, and its caller
// writes the call, so it can send the recorded one.
func (rp *Replayer) differsHint(typ, attr string) string {
	if rp.driven {
		return "Record again with oprov run --record, or change the call to the one the recording holds."
	}
	return "Record again with oprov run --record, or leave the attribute out of the comparison with --replay-ignore " + typ + "." + attr + "."
}
