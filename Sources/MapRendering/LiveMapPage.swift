import GatewayCore

/// The operator API's live map (`GET /`): the offline map's view (``MapPage/script``) fed by
/// Server-Sent Events from `events` next to the page.
///
/// The page holds no data: the event stream starts with a snapshot (every device's tail, the
/// fences, recent events, the components' counters) and then sends each new position and event
/// as it happens, the counters when they change, and a new snapshot after a reload. Each message
/// is one JSON object with a `type`: `snapshot` (`map` in the ``MapData/json`` shape with one
/// track per device, `tail`), `position` (`device`, `point`, `time`?), `event` (`event`: a
/// ``MapData/json`` event with `point` optional, `status` for antenna events and `attributes`
/// when the event carries some: a motion event's trip, stop, overspeed or idling) and `components`
/// (`components`: `id`, `type`, `received`, `emitted`, `dropped`).
///
/// For tests and scripts, each device is also listed in the panel as an element with the class
/// `locgate-live-device` and the attributes `data-device`, `data-lat`, `data-lon` (where its
/// marker is) and `data-moves` (how many times its marker moved).
public enum LiveMapPage {
    /// The whole HTML document; `title` is shown in the browser's tab.
    public static func render(leaflet: LeafletAssets, title: String = "locgate live map") -> String {
        var html = MapPage.documentStart(leaflet: leaflet, title: title, extraStylesheet: stylesheet, noReferrer: true)
        html += "<script>\n"
        html += MapPage.scriptSafe(script)
        html += "\n</script>\n</body>\n</html>\n"
        return html
    }

    static let stylesheet = #"""
    .locgate-live { background: rgba(255, 255, 255, 0.93); padding: 6px 10px; border-radius: 4px;
      box-shadow: 0 1px 4px rgba(0, 0, 0, 0.3); max-width: 420px; max-height: 80vh; overflow: auto; }
    .locgate-live h1 { font-size: 14px; margin: 0 0 4px; }
    .locgate-live h2 { font-size: 12px; margin: 6px 0 2px; }
    .locgate-live ul { margin: 2px 0; padding-left: 16px; }
    .locgate-live table { border-collapse: collapse; font-size: 12px; }
    .locgate-live td, .locgate-live th { padding: 0 6px 0 0; text-align: right; }
    .locgate-live td:first-child, .locgate-live th:first-child { text-align: left; }
    .locgate-live .off { color: #c92a2a; }
    .locgate-live .muted { color: #5f6b76; }

    """#

    static let script = #"""
    /* locgate live map: the map view fed by the gateway's Server-Sent Events. */
    (function () {
      'use strict';
      var view = LocgateMap.create(document.getElementById('locgate-map'), {});
      var markers = L.layerGroup().addTo(view.map);
      var devices = {}, order = [], events = [], components = [], tail = 50, datum = 'wgs84';
      var status = 'connecting…', fitted = false, pending = false;
      var panel = L.control({ position: 'topleft' });
      panel.onAdd = function () {
        this._div = L.DomUtil.create('div', 'locgate-live');
        L.DomEvent.disableClickPropagation(this._div);
        L.DomEvent.disableScrollPropagation(this._div);
        return this._div;
      };
      panel.addTo(view.map);

      function esc(s) {
        return String(s).replace(/[&<>"]/g, function (c) { return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]; });
      }

      function device(name) {
        var d = devices[name];
        if (!d) {
          d = devices[name] = { points: [], count: 0, moves: 0, time: null, marker: null };
          order.push(name);
          order.sort();
        }
        return d;
      }

      // Moves (or places) the device's marker; every move is counted so a test can see it.
      function place(name, d) {
        var p = d.points[d.points.length - 1];
        if (!p) { return; }
        if (!d.marker) {
          d.marker = L.circleMarker(p, { className: 'locgate-device', radius: 8, color: '#111', weight: 2, fillColor: '#fab005', fillOpacity: 1 })
            .bindTooltip(esc(name), { permanent: true, direction: 'right', offset: [8, 0] }).addTo(markers);
        } else {
          var at = d.marker.getLatLng();
          if (at.lat !== p[0] || at.lng !== p[1]) { d.marker.setLatLng(p); d.moves++; }
        }
      }

      function render() {
        pending = false;
        view.setTracks(order.map(function (name) {
          var d = devices[name];
          return { name: name, points: d.points, originalCount: d.count };
        }));
        view.setEvents(events.filter(function (e) { return e.point; }));
        order.forEach(function (name) { place(name, devices[name]); });
        if (!fitted && order.length) { view.fit(); fitted = true; }
        var h = '<h1>locgate live map <span class="muted">— ' + esc(datum.toUpperCase()) + '</span></h1>' +
          '<div class="locgate-live-status' + (status === 'live' ? '' : ' off') + '">' + esc(status) + '</div>';
        h += '<h2>devices (tail of ' + tail + ')</h2><ul>';
        order.forEach(function (name) {
          var d = devices[name], p = d.marker ? d.marker.getLatLng() : null;
          h += '<li class="locgate-live-device" data-device="' + esc(name) + '" data-moves="' + d.moves + '"' +
            (p ? ' data-lat="' + p.lat + '" data-lon="' + p.lng + '"' : '') + '>' + esc(name) +
            (p ? ': ' + p.lat.toFixed(6) + ', ' + p.lng.toFixed(6) : '') + (d.time ? ' <span class="muted">' + esc(d.time) + '</span>' : '') + '</li>';
        });
        h += '</ul>';
        if (events.length) {
          h += '<h2>recent events</h2><ul class="locgate-live-events">';
          events.slice(-8).reverse().forEach(function (e) {
            var line = LocgateMap.detail(e);
            h += '<li>' + esc(e.kind) + (e.fenceId ? ' ' + esc(e.fenceName || e.fenceId) : '') + (e.status ? ' ' + esc(e.status) : '') +
              (line ? ' ' + esc(line) : '') +
              ' · ' + esc(e.device) + (e.time ? ' <span class="muted">' + esc(e.time) + '</span>' : '') + '</li>';
          });
          h += '</ul>';
        }
        if (components.length) {
          h += '<h2>components</h2><table class="locgate-live-components"><tr><th>component</th><th>in</th><th>out</th><th>dropped</th></tr>';
          components.forEach(function (c) {
            h += '<tr data-component="' + esc(c.id) + '"><td>' + esc(c.id) + ' <span class="muted">' + esc(c.type) + '</span></td><td>' +
              (c.id.indexOf('sources.') === 0 ? '' : c.received) + '</td><td>' + c.emitted + '</td><td>' + c.dropped + '</td></tr>';
          });
          h += '</table>';
        }
        panel._div.innerHTML = h;
      }

      // Several messages a frame redraw once.
      function schedule() { if (!pending) { pending = true; setTimeout(render, 100); } }

      var handlers = {
        snapshot: function (m) {
          datum = m.map.datum;
          tail = m.tail;
          var seen = {};
          m.map.tracks.forEach(function (t) {
            var d = device(t.name);
            seen[t.name] = true;
            d.points = t.points;
            d.count = t.originalCount;
            d.time = t.end || null;
          });
          order = order.filter(function (name) {
            if (seen[name]) { return true; }
            if (devices[name].marker) { markers.removeLayer(devices[name].marker); }
            delete devices[name];
            return false;
          });
          events = m.map.events;
          view.setDatum(m.map.datum);
          view.setFences(m.map.fences);
          view.setNotes(m.map.notes);
          if (m.components) { components = m.components; }
          schedule();
        },
        position: function (m) {
          var d = device(m.device);
          d.points.push(m.point);
          if (d.points.length > tail) { d.points.splice(0, d.points.length - tail); }
          d.count++;
          d.time = m.time || null;
          schedule();
        },
        event: function (m) {
          events.push(m.event);
          if (events.length > 200) { events.splice(0, events.length - 200); }
          schedule();
        },
        components: function (m) { components = m.components; schedule(); }
      };

      // The query string carries the token when the page was opened with ?token=…: an
      // EventSource cannot send an Authorization header.
      var stream = new EventSource('events' + location.search);
      stream.onopen = function () { status = 'live'; schedule(); };
      stream.onerror = function () {
        status = stream.readyState === EventSource.CLOSED ? 'disconnected (reload the page to retry)' : 'reconnecting…';
        schedule();
      };
      stream.onmessage = function (e) {
        var m = JSON.parse(e.data);
        if (handlers[m.type]) { handlers[m.type](m); }
      };
      render();
    })();
    """#
}
