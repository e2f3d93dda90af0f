"""The admin page's files (index.html, admin.css, admin.js, chart.js): plain files served as they are by
gateway/http/routes/admin_page.py; no code here, no build step."""
