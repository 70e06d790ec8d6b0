// Package report writes forkfuzz's HTML views: a self-contained
// report.html in every finding directory (a timeline of the processes and
// threads with their operations, forks, waits and views; the region map;
// the first bad page's history; rollback measurements; the consistent-cut
// witness of thread findings; kernel identity and the replay command), and
// the campaign page of a workdir (rates over time, findings grouped with
// counts and replay rates, agents), static or served live.
//
// Pages are plain HTML with inline CSS and SVG drawn here, so they open
// from a file with no network and no build step; a few lines of inline
// JavaScript only copy the replay command and mark the page as rendered
// (data-svg, data-links on <body>, which the browser test reads).
package report
