package coldread

// The test hooks of the read path, for the external tests of this package
// (which compact through coldtier, and coldtier imports coldread).
var (
	// ForceArrow sends every file through iceberg-go's Arrow path.
	ForceArrow = &forceArrow
	// WholeFileMax is the size up to which a file is read in one request.
	WholeFileMax = &wholeFileMax
)

// SwapDeleteCache gives the read path an empty cache of decoded delete
// files bounded by maxBytes (0: nothing kept) until restore is called.
func SwapDeleteCache(maxBytes int64) (restore func()) {
	was := deleteCache
	deleteCache = newPositionCache(maxBytes)
	return func() { deleteCache = was }
}
