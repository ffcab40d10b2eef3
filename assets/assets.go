// Package assets embeds the static files the pages use and serves them with
// content-hashed URLs, so browsers can cache them for a year.
package assets

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
)

//go:embed static
var static embed.FS

// FS is the embedded static tree, rooted at static/.
var FS, _ = fs.Sub(static, "static")

// hashes maps a file name to the first bytes of its content hash.
var hashes = func() map[string]string {
	m := map[string]string{}
	_ = fs.WalkDir(FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(FS, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		m[p] = hex.EncodeToString(sum[:6])
		return nil
	})
	return m
}()

// URL returns the cache-busting URL of an embedded file, such as /assets/style.css?v=1a2b3c.
func URL(name string) string {
	return "/assets/" + name + "?v=" + hashes[name]
}

// Handler serves /assets/; a URL whose hash matches the content is cacheable for a year.
func Handler() http.Handler {
	files := http.StripPrefix("/assets/", http.FileServerFS(FS))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := path.Clean(r.URL.Path[len("/assets/"):])
		if v := r.URL.Query().Get("v"); v != "" && v == hashes[name] {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		files.ServeHTTP(w, r)
	})
}
