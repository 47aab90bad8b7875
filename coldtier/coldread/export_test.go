package coldread

// The test hooks of the read path, for the external tests of this package
// (which compact through coldtier, and coldtier imports coldread).
var (
	// ForceArrow sends every file through iceberg-go's Arrow path.
	ForceArrow = &forceArrow
	// WholeFileMax is the size up to which a file is read in one request.
	WholeFileMax = &wholeFileMax
)
