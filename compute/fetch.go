package compute

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// maxSourceBytes caps a fetched script or plugin, so that a wrong URL cannot
// fill memory.
const maxSourceBytes = 256 << 20

// fetchState is what the last fetch of a source saw, to tell a change.
type fetchState struct {
	have    bool
	hash    [32]byte
	modTime time.Time // files
	size    int64     // files
	etag    string    // http
	lastMod string    // http
}

// fetched is one version of a source's content.
type fetched struct {
	data []byte // Lua code; nil for plugins
	path string // local file of a plugin
	hash [32]byte
}

// fetcher reads file and http(s) sources.
type fetcher struct {
	client    *http.Client
	baseDir   string
	pluginDir string
}

// localPath is src.Path made absolute against the config's directory.
func (f *fetcher) localPath(src Source) string {
	if filepath.IsAbs(src.Path) || f.baseDir == "" {
		return src.Path
	}
	return filepath.Join(f.baseDir, src.Path)
}

// fetch returns the source's content if it changed since prev (changed
// false and a zero fetched otherwise).
func (f *fetcher) fetch(ctx context.Context, src Source, prev fetchState) (fetched, fetchState, bool, error) {
	switch src.Kind {
	case SourceFile:
		return f.fetchFile(src, prev)
	case SourceHTTP:
		return f.fetchHTTP(ctx, src, prev)
	}
	return fetched{}, prev, false, fmt.Errorf("source %s cannot be fetched", src)
}

func (f *fetcher) fetchFile(src Source, prev fetchState) (fetched, fetchState, bool, error) {
	path := f.localPath(src)
	fi, err := os.Stat(path)
	if err != nil {
		return fetched{}, prev, false, err
	}
	if fi.IsDir() {
		return fetched{}, prev, false, fmt.Errorf("%s is a directory", path)
	}
	// A plugin is large and can only be reloaded under a new path anyway:
	// read it only when its size or mtime moved. Scripts are small: hash
	// them every time, which also catches same-size edits within one mtime tick.
	if src.Plugin && prev.have && fi.ModTime().Equal(prev.modTime) && fi.Size() == prev.size {
		return fetched{}, prev, false, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fetched{}, prev, false, err
	}
	st := fetchState{have: true, hash: sha256.Sum256(data), modTime: fi.ModTime(), size: fi.Size()}
	if prev.have && st.hash == prev.hash {
		return fetched{}, st, false, nil
	}
	out := fetched{hash: st.hash}
	if src.Plugin {
		out.path, err = filepath.Abs(path)
	} else {
		out.data = data
	}
	return out, st, true, err
}

func (f *fetcher) fetchHTTP(ctx context.Context, src Source, prev fetchState) (fetched, fetchState, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.URL, nil)
	if err != nil {
		return fetched{}, prev, false, err
	}
	if prev.have {
		if prev.etag != "" {
			req.Header.Set("If-None-Match", prev.etag)
		}
		if prev.lastMod != "" {
			req.Header.Set("If-Modified-Since", prev.lastMod)
		}
	}
	client := f.client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fetched{}, prev, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified && prev.have {
		return fetched{}, prev, false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return fetched{}, prev, false, fmt.Errorf("GET %s: %s", src.URL, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxSourceBytes+1))
	if err != nil {
		return fetched{}, prev, false, fmt.Errorf("GET %s: %w", src.URL, err)
	}
	if len(data) > maxSourceBytes {
		return fetched{}, prev, false, fmt.Errorf("GET %s: larger than %d bytes", src.URL, maxSourceBytes)
	}
	st := fetchState{have: true, hash: sha256.Sum256(data), etag: resp.Header.Get("ETag"), lastMod: resp.Header.Get("Last-Modified")}
	if prev.have && st.hash == prev.hash {
		return fetched{}, st, false, nil
	}
	out := fetched{hash: st.hash}
	if !src.Plugin {
		out.data = data
		return out, st, true, nil
	}
	// A downloaded plugin is stored under its content hash: every version
	// gets its own path, which is what Go's plugin loader needs.
	dir := f.pluginDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "sluice-plugins")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fetched{}, prev, false, err
	}
	out.path = filepath.Join(dir, hex.EncodeToString(st.hash[:])+".so")
	if _, err := os.Stat(out.path); err != nil {
		tmp, err := os.CreateTemp(dir, ".download-*")
		if err != nil {
			return fetched{}, prev, false, err
		}
		_, werr := tmp.Write(data)
		cerr := tmp.Close()
		if werr != nil || cerr != nil {
			os.Remove(tmp.Name())
			return fetched{}, prev, false, fmt.Errorf("store plugin %s: %v %v", out.path, werr, cerr)
		}
		if err := os.Rename(tmp.Name(), out.path); err != nil {
			os.Remove(tmp.Name())
			return fetched{}, prev, false, err
		}
	}
	return out, st, true, nil
}
