// HTML assembly of report.html: figures as Vega-Lite specs rendered by the inlined runtime; a
// status element records how many figures were drawn and any script errors (read by the
// headless-browser test).
#include <fstream>
#include <string>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/report/report.hpp"

#ifdef SINKSCOPE_HAVE_REPORT_JS
extern "C" const char sinkscope_vega_js[];
extern "C" const char sinkscope_vega_lite_js[];
extern "C" const char sinkscope_vega_embed_js[];
#endif

namespace sinkscope::report {

bool have_vega_runtime() {
#ifdef SINKSCOPE_HAVE_REPORT_JS
    return true;
#else
    return false;
#endif
}

namespace {

// Marks the reports sinkscope wrote, so --overwrite never replaces a page of the user's.
constexpr const char* kGenerator = "sinkscope";

std::string escape_html(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

// Inline JavaScript must not close its own <script> element; "<\/script" is the same text to
// JavaScript (in strings and regular expressions alike).
std::string script_safe(std::string js) {
    for (const std::string needle : {"</script", "</SCRIPT"}) {
        size_t pos = 0;
        while ((pos = js.find(needle, pos)) != std::string::npos) {
            js.replace(pos, 2, "<\\/");
            pos += needle.size() + 1;
        }
    }
    return js;
}

// JSON inside a <script> element: '<' only occurs inside strings, where \u003c means the same.
std::string json_safe(const std::string& json) {
    std::string out;
    out.reserve(json.size());
    for (char c : json) out += c == '<' ? std::string("\\u003c") : std::string(1, c);
    return out;
}

void flatten(const nlohmann::json& j, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& out) {
    if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it)
            flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    } else if (j.is_array() && j.size() > 12) {
        out.emplace_back(
            prefix, j.dump().substr(0, 200) + " ... (" + std::to_string(j.size()) + " entries)");
    } else {
        out.emplace_back(prefix, j.is_string() ? j.get<std::string>() : j.dump());
    }
}

const char* kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2430;)"
                     R"(background:#fafbfc}
header{background:#1d2430;color:#fff;padding:18px 32px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c9d1dc;font-size:13px}main{padding:16px 32px;max-width:1200px}
h2{border-bottom:1px solid #d5dbe3;padding-bottom:4px;margin-top:32px}
.fig{background:#fff;border:1px solid #e1e5eb;border-radius:6px;padding:12px 16px;margin:16px 0}
.fig h3{margin:0 0 4px;font-size:16px}.fig p.caption{margin:0 0 8px;color:#4a5566;font-size:13px}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:8px 12px;margin:8px 0;font-size:14px}
table.conv{border-collapse:collapse;font-size:12px;width:100%}
table.conv td{border-bottom:1px solid #eef0f3;padding:3px 8px;vertical-align:top;)"
                     R"(word-break:break-all}
table.conv td:first-child{font-family:monospace;white-space:nowrap;color:#334}
#status{font-size:12px;color:#667}
p.exports{margin:4px 0 0;font-size:12px;color:#667}p.exports a{color:#2a5db0}
)";

const char* kDriver =
    R"(
(function(){
  var errors=[];var origError=console.error;
  console.error=function(){errors.push(Array.prototype.join.call(arguments,' '));)"
    R"(origError.apply(console,arguments);};
  window.addEventListener('error',function(e){errors.push(String(e.message));});
  var specs=JSON.parse(document.getElementById('sinkscope-specs').textContent);
  var jobs=specs.map(function(spec,i){
    return vegaEmbed('#fig-'+i,spec,{actions:{export:true,source:false,compiled:false,)"
    R"(editor:false},renderer:'svg'});
  });
  // Properties of the drawn SVG a reader relies on (checked by the headless-browser test):
  // no empty panel, every axis titled, layer axes with distinct integer ticks and no line
  // joining layers (they are categories), no text outside the figure, no two texts on top of
  // each other.
  var counts={empty:0,untitled:0,layerticks:0,clipped:0,layerlines:0,overlap:0},problems=[];
  function note(kind,i,what){counts[kind]++;problems.push('figure '+i+': '+what);}
  function inside(el,sel){for(var p=el.parentNode;p&&p.classList;p=p.parentNode){)"
    R"(if(p.matches(sel))return true;}return false;}
  // The four corners of a text's box on the page, rotation included.
  function corners(t){
    var b=t.getBBox(),m=t.getScreenCTM(),p=t.ownerSVGElement.createSVGPoint();
    return [[b.x,b.y],[b.x+b.width,b.y],[b.x+b.width,b.y+b.height],[b.x,b.y+b.height]].map()"
    R"(function(xy){p.x=xy[0];p.y=xy[1];var q=p.matrixTransform(m);return [q.x,q.y];});
  }
  // The least overlap of two convex quadrilaterals over their edge normals (separating axes);
  // <= 0 when they do not meet.
  function overlap(a,b){
    var least=Infinity;
    [a,b].forEach(function(poly){
      for(var k=0;k<4;k++){
        var e=[poly[(k+1)%4][0]-poly[k][0],poly[(k+1)%4][1]-poly[k][1]],)"
    R"(len=Math.hypot(e[0],e[1]);
        if(!len)continue;
        var n=[-e[1]/len,e[0]/len];
        function span(P){var v=P.map(function(q){return q[0]*n[0]+q[1]*n[1];});)"
    R"(return [Math.min.apply(null,v),Math.max.apply(null,v)];}
        var sa=span(a),sb=span(b);
        least=Math.min(least,Math.min(sa[1],sb[1])-Math.max(sa[0],sb[0]));
      }
    });
    return least;
  }
  function check(i,svg){
    var guide='g.role-axis, g.role-legend, g.role-title';
    var cells=[].filter.call(svg.querySelectorAll('g.role-scope'),function(g){
      return !inside(g,guide)&&![].some.call(g.querySelectorAll('g.role-scope'),function(c){)"
    R"(return !inside(c,guide);});});
    if(!cells.length)cells=[svg];
    cells.forEach(function(cell){
      var items=0;
      cell.querySelectorAll('g.role-mark').forEach(function(m){
        if(!inside(m,guide))items+=m.children.length;});
      if(!items)note('empty',i,'an empty panel');
      var xlayer=[].some.call(cell.querySelectorAll('g.role-axis'),function(ax){
        return /^X-axis titled 'layer/.test(ax.getAttribute('aria-label')||'');});
      if(xlayer&&[].some.call(cell.querySelectorAll('g.mark-line'),function(m){)"
    R"(return !inside(m,guide)&&m.children.length;}))
        note('layerlines',i,'layers joined by a line');
    });
    svg.querySelectorAll('g.role-axis').forEach(function(ax){
      var labels=[].map.call(ax.querySelectorAll('g.role-axis-label text'),function(t){)"
    R"(return t.textContent;});
      if(!labels.length)return;
      var t=ax.querySelector('g.role-axis-title text'),title=t?t.textContent.trim():'';
      if(!title){note('untitled',i,'an axis without a title');return;}
      if(/^layer\b/i.test(title)){
        var seen={};
        labels.forEach(function(l){if(!/^-?[0-9]+$/.test(l)||seen[l])note('layerticks',i,)"
    R"('layer tick "'+l+'"');seen[l]=1;});
      }
    });
    var box=svg.getBoundingClientRect(),shown=[];
    svg.querySelectorAll('text').forEach(function(t){
      var r=t.getBoundingClientRect();
      if(!t.textContent.trim()||r.width===0)return;
      for(var e=t;e&&e!==svg;e=e.parentNode){var o=e.getAttribute&&e.getAttribute('opacity');)"
    R"(if(o!==null&&o!==undefined&&+o===0)return;}
      if(r.left<box.left-1||r.right>box.right+1||r.top<box.top-1||r.bottom>box.bottom+1)
        note('clipped',i,'text "'+t.textContent+'" outside the figure');
      // Two texts overlap when their boxes, turned as drawn (a slanted axis label), overlap by
      // more than 1.5 px along every separating direction.
      var c=corners(t);
      shown.forEach(function(q){
        if(overlap(c,q.c)>1.5)note('overlap',i,'"'+t.textContent+'" over "'+q.text+'"');
      });
      shown.push({c:c,text:t.textContent});
    });
  }
  // Export buttons: each figure as SVG or as PNG (3x), drawn by the same view.
  function slug(s){return s.toLowerCase().replace(/[^a-z0-9]+/g,'-').replace(/^-|-$/g,'');}
  jobs.forEach(function(job,i){
    job.then(function(res){
      document.querySelectorAll('a.export[data-fig="'+i+'"]').forEach(function(a){
        a.addEventListener('click',function(ev){
          ev.preventDefault();var fmt=a.getAttribute('data-format');
          res.view.toImageURL(fmt,fmt==='png'?3:1).then(function(url){
            var d=document.createElement('a');d.href=url;)"
    R"(d.download=slug(a.getAttribute('data-title'))+'.'+fmt;
            document.body.appendChild(d);d.click();d.remove();});
        });
      });
    },function(){});
  });
  Promise.allSettled(jobs).then(function(results){
    var drawn=0;
    results.forEach(function(r,i){
      var el=document.getElementById('fig-'+i),svg=el.querySelector('svg');
      if(r.status==='fulfilled'&&svg){drawn++;check(i,svg);}
      else{errors.push('figure '+i+': '+(r.reason||'nothing drawn'));}
    });
    var st=document.getElementById('status');
    st.setAttribute('data-figures',String(specs.length));
    st.setAttribute('data-drawn',String(drawn));
    st.setAttribute('data-errors',String(errors.length));
    st.setAttribute('data-empty-panels',String(counts.empty));
    st.setAttribute('data-untitled-axes',String(counts.untitled));
    st.setAttribute('data-layer-ticks',String(counts.layerticks));
    st.setAttribute('data-clipped-labels',String(counts.clipped));
    st.setAttribute('data-layer-lines',String(counts.layerlines));
    st.setAttribute('data-overlapping-labels',String(counts.overlap));
    st.setAttribute('data-done','1');
    st.textContent=drawn+' of '+specs.length+' figures drawn'+)"
    R"((errors.length?'; errors: '+errors.join(' | '):'')+
      (problems.length?'; layout problems: '+problems.join(' | '):'');
  });
})();
)";

}  // namespace

std::string render_html(const ReportContent& c) {
    if (!have_vega_runtime())
        throw UnsupportedError(
            "report.html: this build has no Vega runtime; run scripts/install-deps.sh and rebuild");
    std::string h;
    h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
    h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    h += std::string("<meta name=\"generator\" content=\"") + kGenerator + "\">\n";
    h += "<title>" + escape_html(c.title) + "</title>\n<style>" + kStyle + "</style>\n";
#ifdef SINKSCOPE_HAVE_REPORT_JS
    h += "<script>" + script_safe(sinkscope_vega_js) + "</script>\n";
    h += "<script>" + script_safe(sinkscope_vega_lite_js) + "</script>\n";
    h += "<script>" + script_safe(sinkscope_vega_embed_js) + "</script>\n";
#endif
    h += "</head><body>\n<header><h1>" + escape_html(c.title) + "</h1>";
    std::string sub = "sinkscope";
    // run.json may come from elsewhere: only string fields are shown.
    const auto text_at = [&](const char* a, const char* b) -> std::string {
        if (!c.run.is_object() || !c.run.contains(a)) return "";
        const auto& v =
            b ? (c.run[a].is_object() && c.run[a].contains(b) ? c.run[a][b] : nullptr) : c.run[a];
        return v.is_string() ? v.get<std::string>() : "";
    };
    if (const std::string v = text_at("tool", "version"); !v.empty()) sub += " " + v;
    if (const std::string t = text_at("started_utc", nullptr); !t.empty())
        sub += " · run started " + t;
    h += "<p>" + escape_html(sub) + "</p></header>\n<main>\n";
    h += "<p id=\"status\" data-done=\"0\">rendering figures…</p>\n";
    for (const auto& n : c.notes) h += "<div class=\"note\">" + escape_html(n) + "</div>\n";

    std::string section;
    nlohmann::json specs = nlohmann::json::array();
    for (size_t i = 0; i < c.figures.size(); ++i) {
        const auto& f = c.figures[i];
        if (f.section != section) {
            section = f.section;
            h += "<h2>" + escape_html(section) + "</h2>\n";
        }
        const std::string n = std::to_string(i), title = escape_html(f.title);
        h += "<div class=\"fig\"><h3>" + title + "</h3><p class=\"caption\">" +
             escape_html(f.caption) + "</p><div id=\"fig-" + n + "\"></div>";
        h += "<p class=\"exports\">Export for a paper: ";
        for (const char* fmt : {"svg", "png"})
            h += std::string(fmt[0] == 's' ? "" : " · ") + "<a href=\"#\" class=\"export\" " +
                 "data-fig=\"" + n + "\" data-format=\"" + fmt + "\" data-title=\"" + title +
                 "\">" + (fmt[0] == 's' ? "SVG" : "PNG (3x)") + "</a>";
        h += "</p></div>\n";
        specs.push_back(f.spec);
    }

    h +=
        "<h2>Conventions of this run</h2>\n<p class=\"caption\">Every choice that changes results, "
        "as recorded in run.json (definitions: docs/metrics.md).</p>\n<table class=\"conv\">\n";
    std::vector<std::pair<std::string, std::string>> rows;
    if (!c.run.is_null()) flatten(c.run, "", rows);
    for (const auto& [k, v] : rows)
        h += "<tr><td>" + escape_html(k) + "</td><td>" + escape_html(v) + "</td></tr>\n";
    h += "</table>\n</main>\n";
    // Table cells are bytes from CSV files: invalid UTF-8 becomes U+FFFD instead of an error.
    h += "<script type=\"application/json\" id=\"sinkscope-specs\">" +
         json_safe(specs.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) +
         "</script>\n";
    h += std::string("<script>") + kDriver + "</script>\n</body></html>\n";
    return h;
}

bool is_sinkscope_report(const std::filesystem::path& file) {
    // The generator tag sits in the first lines of <head>; read no more than that.
    std::ifstream in(file, std::ios::binary);
    std::string head(4096, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    return head.find(std::string("<meta name=\"generator\" content=\"") + kGenerator) !=
           std::string::npos;
}

namespace {
std::filesystem::path write_report_impl(const std::filesystem::path& run_dir, bool overwrite,
                                        bool need_figures) {
    // A folder that is not a run, or a run without tables (dump's), would give an empty report
    // that looks like a result: refused, saying what is expected.
    if (!is_sinkscope_run(run_dir))
        throw InputError(run_dir.string(),
                         "not a sinkscope run directory (no run.json written by sinkscope); give "
                         "the --out directory of sinkscope analyze, metrics, prune or fisher");
    const auto path = run_dir / "report.html";
    check_output_file(path, overwrite, is_sinkscope_report);  // before the (slow) rendering
    ReportContent content = collect_report(run_dir);
    if (content.figures.empty() && !need_figures) return {};
    if (content.figures.empty())
        throw InputError(run_dir.string(),
                         "holds no table to report on (analyze, metrics, prune and fisher write "
                         "them; dump does not)");
    std::string html = render_html(content);
    write_output_file(path, html, overwrite, is_sinkscope_report);
    // In the run's list of its files, so that a later --overwrite replaces it. Recorded after
    // the write: were the two cut apart, the page would count as the user's (kept), never the
    // reverse.
    record_run_file(run_dir, "report.html");
    return path;
}
}  // namespace

std::filesystem::path write_report(const std::filesystem::path& run_dir, bool overwrite) {
    return write_report_impl(run_dir, overwrite, true);
}

std::filesystem::path write_report_if_any(const std::filesystem::path& run_dir) {
    return write_report_impl(run_dir, true, false);  // the caller's own staging folder
}

}  // namespace sinkscope::report
