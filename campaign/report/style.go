package report

import (
	"fmt"
	"html/template"
	"strings"
)

// css is shared by every page.
const css = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
header{background:#1d2330;color:#fff;padding:14px 24px}
header h1{font-size:19px;margin:0 0 4px 0;font-weight:600;word-break:break-all}
header .sub{color:#b9c0cf;font-size:13px}
main{padding:8px 24px 40px 24px;max-width:1400px}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:12px 16px;margin:14px 0}
h2{font-size:16px;margin:0 0 8px 0}
h3{font-size:14px;margin:12px 0 6px 0}
table{border-collapse:collapse;font-size:13px}
th,td{border-bottom:1px solid #e6e9ee;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12.5px}
pre{background:#f6f8fa;border:1px solid #e3e6ea;padding:8px;overflow-x:auto;white-space:pre-wrap;margin:4px 0}
.badge{display:inline-block;border-radius:10px;padding:1px 9px;font-size:12px;font-weight:600;color:#fff;background:#6b7280;margin-right:6px}
.b-snapshot,.b-isolation,.b-memory,.b-shared{background:#c0392b}
.b-linearizability,.b-linearizability-unknown{background:#8e44ad}
.b-rollback,.b-pagetable{background:#d35400}
.b-mapping,.b-errno{background:#2c7be5}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px}
.kv div:nth-child(odd){color:#5b6475}
.exp{background:#e3f6e8;color:#11632c;font-weight:600}
.act{background:#fde2e0;color:#a3190f;font-weight:600}
tr.hit td{background:#fff4d6}
.cmd{display:flex;gap:8px;align-items:center}
.cmd pre{flex:1}
button{font:inherit;font-size:12px;padding:3px 10px;border:1px solid #b8c0cc;border-radius:4px;background:#fff;cursor:pointer}
.note{color:#5b6475;font-size:12.5px}
.warn{color:#a3190f}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:4px;vertical-align:-1px;border:1px solid #0003}
svg text{font-family:system-ui,"DejaVu Sans",sans-serif}
.scroll{overflow-x:auto}
details>summary{cursor:pointer;font-weight:600;margin:4px 0}
a{color:#1f5fbf}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.changed{background:#fff1c2;font-weight:600}
`

// script marks the page as rendered for the browser test and copies the
// replay command.
const script = `
<script>
function ffCopy(id){var t=document.getElementById(id).textContent;if(navigator.clipboard){navigator.clipboard.writeText(t)}}
window.addEventListener('load',function(){
  var n=0;document.querySelectorAll('svg').forEach(function(s){var r=s.getBoundingClientRect();if(r.width>0&&r.height>0&&s.querySelectorAll('rect,path,polyline,line,circle').length>0)n++});
  document.body.setAttribute('data-svg',String(n));
  document.body.setAttribute('data-links',String(document.querySelectorAll('a[href]').length));
  document.body.setAttribute('data-rendered','1');
});
</script>`

func page(title string, body template.HTML) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>%s</title>\n<style>%s</style>\n</head><body>\n",
		template.HTMLEscapeString(title), css)
	b.WriteString(string(body))
	b.WriteString(script)
	b.WriteString("\n</body></html>\n")
	return []byte(b.String())
}

// esc escapes text for HTML.
func esc(s string) string { return template.HTMLEscapeString(s) }

// html is a small builder of trusted HTML.
type html struct{ strings.Builder }

func (h *html) f(format string, args ...any) { fmt.Fprintf(&h.Builder, format, args...) }

func (h *html) HTML() template.HTML { return template.HTML(h.String()) }
