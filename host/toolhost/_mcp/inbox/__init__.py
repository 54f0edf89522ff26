"""The approvals inbox: a web page under ``/ui/`` on ``toolhost serve --http`` for the people
who approve (D314). ``app`` routes its requests, ``login`` keeps a browser's login and its CSRF
token, ``pages`` writes its HTML; ``static`` holds its one script and its style sheet."""
