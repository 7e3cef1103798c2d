"""The script of a run's page: while the run goes on, new events are fetched from the event log
(`/api/runs/{task_id}/events?after=SEQ`, once a second) and added to the timeline as text; at
the run's `stop` the page reloads to show where it ended."""

from __future__ import annotations

from typing import Final

POLL_MS: Final = 1000

LIVE_JS: Final = f"""
(function () {{
  const table = document.getElementById("timeline");
  if (!table || table.dataset.live !== "True") return;
  const task = table.dataset.task;
  let after = Number(table.dataset.after);
  const live = document.getElementById("live");
  live.textContent = "live: following the run's events";
  async function poll() {{
    try {{
      const answer = await fetch("/api/runs/" + encodeURIComponent(task) + "/events?after=" + after,
                                 {{credentials: "same-origin"}});
      if (answer.ok) {{
        const body = await answer.json();
        for (const row of body.rows) {{
          const tr = document.createElement("tr");
          tr.dataset.seq = String(row.seq);
          for (const key of ["seq", "t", "step", "kind", "summary"]) {{
            const td = document.createElement("td");
            td.textContent = String(row[key]);
            if (key === "kind") td.className = "kind";
            tr.appendChild(td);
          }}
          table.tBodies[0].appendChild(tr);
        }}
        after = body.last;
        if (body.stopped) {{
          live.textContent = "the run stopped: reloading";
          window.location.reload();
          return;
        }}
      }}
    }} catch (error) {{
      live.textContent = "live: " + error;
    }}
    setTimeout(poll, {POLL_MS});
  }}
  setTimeout(poll, {POLL_MS});
}})();
"""
