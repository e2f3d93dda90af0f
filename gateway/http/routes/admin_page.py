"""GET /admin: the admin page, four plain files shipped in the package (gateway/http/admin/).

The page and its files need no key (they hold nothing secret): the admin key is typed into the
page, kept in the tab's sessionStorage, and sent by its script to /v1/admin/... like any client's.
Every response of the page carries a strict Content-Security-Policy: scripts and styles from the
gateway's own files only (no inline script or style), requests to the gateway only, no frames,
nothing from another origin. The files are read when asked for (the page is opened rarely): a
file changed in a checkout is seen on reload.
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web

routes = web.RouteTableDef()

#: path -> (file in gateway/http/admin/, content type); a fixed list, so no path reaches the disk
FILES = {
    "/admin": ("index.html", "text/html"),
    "/admin/admin.css": ("admin.css", "text/css"),
    "/admin/admin.js": ("admin.js", "text/javascript"),
    "/admin/chart.js": ("chart.js", "text/javascript"),
}
#: What the page may load and do. `img-src data:` is not needed (the chart is inline SVG made by
#: the script); `form-action 'none'`: the forms are handled by the script, never submitted.
#: Trusted Types with no policy: the script may not hand a string to any HTML sink (innerHTML and
#: the like), so the API's values can only ever become text.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
       "require-trusted-types-for 'script'; trusted-types 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    # the page is small and changes with the gateway: asked again each time, never stale
    "Cache-Control": "no-cache",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def page_file(name: str) -> bytes:
    return resources.files("gateway.http.admin").joinpath(name).read_bytes()


@routes.get("/admin")
@routes.get("/admin/admin.css")
@routes.get("/admin/admin.js")
@routes.get("/admin/chart.js")
async def admin_page(request: web.Request) -> web.Response:
    name, content_type = FILES[request.path]
    return web.Response(body=page_file(name), content_type=content_type, charset="utf-8", headers=HEADERS)
