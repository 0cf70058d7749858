extension MapPage {
    /// The page's stylesheet (after Leaflet's).
    public static let stylesheet = #"""
    html, body { margin: 0; height: 100%; font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; }
    #locgate-map { position: absolute; top: 0; right: 0; bottom: 0; left: 0; }
    .locgate-plain.leaflet-container { background: #f3f1ec; }
    .locgate-grid-label { color: #5f6b76; font-size: 11px; white-space: nowrap; text-shadow: 0 0 2px #fff; }
    .locgate-grid-label.parallel { margin-top: -14px; margin-left: 4px; }
    .locgate-grid-label.meridian { margin-top: -16px; margin-left: 3px; }
    .locgate-info { background: rgba(255, 255, 255, 0.93); padding: 6px 10px; border-radius: 4px;
      box-shadow: 0 1px 4px rgba(0, 0, 0, 0.3); max-width: 380px; }
    .locgate-info h1 { font-size: 14px; margin: 0 0 4px; }
    .locgate-info ul { margin: 2px 0; padding-left: 16px; }
    .locgate-info .muted { color: #5f6b76; }
    .locgate-swatch { display: inline-block; width: 14px; height: 4px; vertical-align: middle; margin-right: 5px; }
    .locgate-dot { display: inline-block; width: 10px; height: 10px; border-radius: 50%; vertical-align: middle; margin-right: 4px; }
    .locgate-gridstep { background: rgba(255, 255, 255, 0.8); padding: 0 5px; color: #333; font-size: 11px; }
    """#

    /// The page's script: `LocgateMap.create(element, options)` returns a view with
    /// `setTracks`, `setFences`, `setEvents`, `setNotes` and `fit`, each taking the matching
    /// part of ``MapData/json``; `LocgateMap.show(element, data, options)` draws a whole map.
    /// Options: `tiles` (URL template) and `tilesAttribution`. Paths carry the classes
    /// `locgate-track`, `locgate-fence`, `locgate-event locgate-event-<kind>` so tests and
    /// stylesheets can find them.
    public static let script = #"""
    /* locgate map: tracks, fences and events (geofence, health, motion) on Leaflet, with no network. */
    var LocgateMap = (function () {
      'use strict';
      var palette = ['#1c63d6', '#c2255c', '#2b8a3e', '#e8590c', '#6741d9', '#0b7285', '#5c940d', '#862e9c'];
      var eventColors = { enter: '#2f9e44', exit: '#e03131', dwell: '#f08c00', trip_start: '#1c7ed6', trip_end: '#1864ab',
        stop_start: '#495057', stop_end: '#adb5bd', ignition_on: '#37b24d', ignition_off: '#212529', overspeed: '#c92a2a', idle: '#fab005' };
      var steps = [1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 45];

      function esc(s) {
        return String(s).replace(/[&<>"]/g, function (c) { return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]; });
      }
      function count(n) { return Number(n).toLocaleString('en-US'); }
      function ll(p) { return [p[0], p[1]]; }
      function duration(s) {
        s = Math.round(Number(s));
        return s >= 3600 ? Math.floor(s / 3600) + ' h ' + Math.round(s % 3600 / 60) + ' min' : s >= 60 ? Math.floor(s / 60) + ' min ' + s % 60 + ' s' : s + ' s';
      }
      // What a motion event's attributes say, in a line: a trip's length and time, a stop's or idling's time, an overspeed.
      function detail(e) {
        var a = e.attributes || {};
        if (e.kind === 'trip_end' && a['trip.distance_m']) {
          return 'trip ' + metres(Number(a['trip.distance_m'])) + ' in ' + duration(a['trip.duration_s']) +
            (a['trip.max_speed_kmh'] ? ', max ' + a['trip.max_speed_kmh'] + ' km/h' : '');
        }
        if (e.kind === 'stop_end' && a['stop.duration_s']) { return 'stopped ' + duration(a['stop.duration_s']); }
        if (e.kind === 'idle' && a['idle.duration_s']) { return 'idling ' + duration(a['idle.duration_s']); }
        if (e.kind === 'overspeed' && a['overspeed.max_speed_kmh']) {
          return a['overspeed.max_speed_kmh'] + ' km/h (limit ' + a['overspeed.limit_kmh'] + ') for ' + duration(a['overspeed.duration_s']);
        }
        return '';
      }
      function metres(m) { return m >= 1000 ? (m / 1000).toFixed(m >= 10000 ? 0 : 1) + ' km' : Math.round(m) + ' m'; }

      // Meridians and parallels at a round spacing for the view, so distances read without tiles.
      var Graticule = L.LayerGroup.extend({
        onAdd: function (map) {
          L.LayerGroup.prototype.onAdd.call(this, map);
          this._gridMap = map;
          map.on('moveend', this._redraw, this);
          this._redraw();
        },
        onRemove: function (map) {
          map.off('moveend', this._redraw, this);
          L.LayerGroup.prototype.onRemove.call(this, map);
          if (this.onStep) { this.onStep(null); }
        },
        _redraw: function () {
          this.clearLayers();
          var b = this._gridMap.getBounds();
          var south = Math.max(b.getSouth(), -85), north = Math.min(b.getNorth(), 85);
          var west = b.getWest(), east = b.getEast();
          // Each axis gets its own round step: away from the equator a degree of longitude is shorter.
          function pick(span) {
            for (var i = 0; i < steps.length; i++) { if (span / steps[i] <= 8) { return steps[i]; } }
            return steps[steps.length - 1];
          }
          function digits(step) { return Math.max(0, Math.ceil(-Math.log10(step) - 1e-9)); }
          var latStep = pick(north - south), lonStep = pick(east - west);
          var style = { className: 'locgate-grid', color: '#9aa5b1', weight: 1, opacity: 0.7, interactive: false };
          var k, v, n = 0;
          for (k = Math.ceil(south / latStep); (v = k * latStep) <= north && n < 200; k++, n++) {
            this.addLayer(L.polyline([[v, west], [v, east]], style));
            this.addLayer(L.marker([v, west], { interactive: false, keyboard: false, icon: L.divIcon({
              className: 'locgate-grid-label parallel', iconSize: null,
              html: Math.abs(v).toFixed(digits(latStep)) + '°' + (v >= 0 ? 'N' : 'S') }) }));
          }
          for (k = Math.ceil(west / lonStep); (v = k * lonStep) <= east && n < 400; k++, n++) {
            this.addLayer(L.polyline([[south, v], [north, v]], style));
            var lon = ((v + 540) % 360) - 180;
            this.addLayer(L.marker([south, v], { interactive: false, keyboard: false, icon: L.divIcon({
              className: 'locgate-grid-label meridian', iconSize: null,
              html: Math.abs(lon).toFixed(digits(lonStep)) + '°' + (lon >= 0 ? 'E' : 'W') }) }));
          }
          if (this.onStep) {
            var mid = (south + north) / 2 * Math.PI / 180;
            this.onStep({ lat: latStep, lon: lonStep, latMetres: latStep * 111320, lonMetres: lonStep * 111320 * Math.cos(mid) });
          }
        }
      });

      function create(element, options) {
        options = options || {};
        var map = L.map(element, { attributionControl: false, zoomSnap: 0.25 }).setView([0, 0], 2);
        element.classList.add(options.tiles ? 'locgate-tiles' : 'locgate-plain');
        var layers = L.control.layers(null, null, { collapsed: false, position: 'topright' });
        if (options.tiles) {
          L.tileLayer(options.tiles, { maxZoom: 19, attribution: options.tilesAttribution ? esc(options.tilesAttribution) : '' }).addTo(map);
          L.control.attribution({ prefix: false }).addTo(map);
        }
        L.control.scale({ metric: true, imperial: false, maxWidth: 200 }).addTo(map);
        var stepLabel = L.control({ position: 'bottomleft' });
        stepLabel.onAdd = function () { this._div = L.DomUtil.create('div', 'locgate-gridstep'); return this._div; };
        stepLabel.addTo(map);
        var grid = new Graticule();
        grid.onStep = function (step) {
          stepLabel._div.textContent = step === null ? '' : 'grid ' + step.lat + '° lat (' + metres(step.latMetres) + ') × ' +
            step.lon + '° lon (' + metres(step.lonMetres) + ')';
        };

        var view = { map: map, tracks: L.layerGroup().addTo(map), fences: L.layerGroup().addTo(map), events: L.layerGroup().addTo(map) };
        var info = L.control({ position: 'bottomright' });
        info.onAdd = function () {
          var div = L.DomUtil.create('div', 'locgate-info');
          this._div = div;
          L.DomEvent.disableClickPropagation(div);
          L.DomEvent.disableScrollPropagation(div);
          return div;
        };
        info.addTo(map);
        var state = { datum: '', tracks: [], fences: [], events: [], notes: [] };

        function renderInfo() {
          var h = '<h1>locgate map <span class="muted">— shown in ' + esc(state.datum.toUpperCase()) + '</span></h1><ul>';
          state.tracks.forEach(function (t, i) {
            h += '<li class="locgate-info-track"><span class="locgate-swatch" style="background:' + palette[i % palette.length] + '"></span>' +
              esc(t.name) + ': ' + count(t.originalCount) + ' fixes';
            if (t.points.length < t.originalCount) { h += ', drawn with ' + count(t.points.length) + ' points'; }
            h += '</li>';
          });
          if (state.fences.length) { h += '<li>' + state.fences.length + ' fence(s)</li>'; }
          if (state.events.length || state.fences.length) {
            var kinds = {};
            state.events.forEach(function (e) { kinds[e.kind] = (kinds[e.kind] || 0) + 1; });
            h += '<li>events: ' + (state.events.length ? Object.keys(kinds).map(function (k) {
              return '<span class="locgate-dot" style="background:' + (eventColors[k] || '#555') + '"></span>' + kinds[k] + ' ' + esc(k);
            }).join(', ') : 'none') + '</li>';
          }
          h += '</ul>';
          if (state.notes.length) {
            h += '<ul class="locgate-notes">' + state.notes.map(function (n) { return '<li>' + esc(n) + '</li>'; }).join('') + '</ul>';
          }
          info._div.innerHTML = h;
        }

        view.setDatum = function (datum) { state.datum = datum || ''; renderInfo(); };
        view.setNotes = function (notes) { state.notes = notes || []; renderInfo(); };

        view.setTracks = function (tracks) {
          state.tracks = tracks || [];
          view.tracks.clearLayers();
          state.tracks.forEach(function (t, i) {
            if (!t.points.length) { return; }
            var color = palette[i % palette.length];
            var pts = t.points.map(ll);
            var label = esc(t.name) + '<br>' + count(t.originalCount) + ' fixes' + (t.start ? '<br>' + esc(t.start) + ' – ' + esc(t.end || '') : '');
            view.tracks.addLayer(L.polyline(pts, { className: 'locgate-track', color: color, weight: 3, opacity: 0.85 }).bindTooltip(label, { sticky: true }));
            view.tracks.addLayer(L.circleMarker(pts[0], { className: 'locgate-track-start', radius: 5, color: color, fillColor: '#fff', fillOpacity: 1, weight: 2 })
              .bindTooltip('start: ' + esc(t.name) + (t.start ? '<br>' + esc(t.start) : '')));
            view.tracks.addLayer(L.circleMarker(pts[pts.length - 1], { className: 'locgate-track-end', radius: 5, color: color, fillColor: color, fillOpacity: 1, weight: 2 })
              .bindTooltip('end: ' + esc(t.name) + (t.end ? '<br>' + esc(t.end) : '')));
          });
          renderInfo();
        };

        view.setFences = function (fences) {
          state.fences = fences || [];
          view.fences.clearLayers();
          state.fences.forEach(function (f) {
            var label = 'fence ' + esc(f.id) + (f.name ? ' (' + esc(f.name) + ')' : '') + (f.origin ? '<br>' + esc(f.origin) : '') +
              (f.sourceDatum && f.sourceDatum !== state.datum ? '<br>drawn in ' + esc(f.sourceDatum.toUpperCase()) + ', shown in ' + esc(state.datum.toUpperCase()) : '');
            var style = { className: 'locgate-fence', color: '#7048e8', weight: 2, fillOpacity: 0.12, dashArray: '6 4' };
            var layer;
            if (f.circle) {
              style.className = 'locgate-fence locgate-fence-circle';
              layer = L.circle(ll(f.circle.center), L.extend({ radius: f.circle.radius }, style));
            } else {
              layer = L.polygon(f.polygons.map(function (rings) { return rings.map(function (r) { return r.map(ll); }); }), style);
            }
            view.fences.addLayer(layer.bindTooltip(label, { sticky: true }));
          });
          renderInfo();
        };

        view.setEvents = function (events) {
          state.events = events || [];
          view.events.clearLayers();
          state.events.forEach(function (e) {
            var color = eventColors[e.kind] || '#555', fence = e.fenceName || e.fenceId, line = detail(e);
            // A stop is where a vehicle is parked: a larger marker than the moments around it.
            view.events.addLayer(L.circleMarker(ll(e.point), {
              className: 'locgate-event locgate-event-' + e.kind, radius: e.kind === 'stop_start' ? 10 : 7, color: '#222', weight: 1.5,
              fillColor: color, fillOpacity: 0.95
            }).bindTooltip(esc(e.kind) + (fence ? ' ' + esc(fence) : '') + (line ? '<br>' + esc(line) : '') + '<br>' + esc(e.device) +
              (e.time ? '<br>' + esc(e.time) : '')));
          });
          renderInfo();
        };

        // Fits the view to everything drawn; the grid starts once there is a view to fill.
        view.fit = function () {
          var bounds = L.latLngBounds([]);
          [view.tracks, view.fences, view.events].forEach(function (g) {
            g.eachLayer(function (l) { bounds.extend(l.getBounds ? l.getBounds() : l.getLatLng()); });
          });
          if (bounds.isValid()) {
            if (bounds.getNorthEast().equals(bounds.getSouthWest())) { map.setView(bounds.getCenter(), 17, { animate: false }); }
            else { map.fitBounds(bounds, { padding: [24, 24], maxZoom: 19, animate: false }); }
          }
          if (!view.gridShown) {
            view.gridShown = true;
            if (!options.tiles) { grid.addTo(map); }
            layers.addOverlay(grid, 'Grid');
            layers.addOverlay(view.tracks, 'Tracks');
            layers.addOverlay(view.fences, 'Fences');
            layers.addOverlay(view.events, 'Events');
            layers.addTo(map);
          }
        };
        return view;
      }

      function show(element, data, options) {
        var view = create(element, options);
        view.setDatum(data.datum);
        view.setFences(data.fences);
        view.setTracks(data.tracks);
        view.setEvents(data.events);
        view.setNotes(data.notes);
        view.fit();
        return view;
      }

      return { create: create, show: show, detail: detail };
    })();
    """#
}
