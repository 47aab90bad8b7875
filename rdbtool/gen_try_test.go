package rdbtool

import (
	"context"
	"os"
	"testing"
)

func TestGenTry(t *testing.T) {
	if os.Getenv("GENTRY") == "" {
		t.Skip()
	}
	p, err := Generate(context.Background(), GenerateOptions{SizeMB: 20, Dir: t.TempDir(), Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	t.Log(p, st.Size())
}
