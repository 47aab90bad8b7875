package coldtier

// SetMergeFanIn sets how many runs one merge of the rewrite reads at once
// and returns the function that restores it (tests force the merge
// through its temporary files with a small one).
func SetMergeFanIn(n int) (restore func()) {
	old := mergeFanIn
	mergeFanIn = n
	return func() { mergeFanIn = old }
}
