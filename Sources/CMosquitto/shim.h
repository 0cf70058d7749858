// libmosquitto (Debian libmosquitto-dev, 2.0), the MQTT client of the `mqtt` sink and source.
// Only Sources/MQTTClient/MQTTConnection.swift talks to it.
#include <mosquitto.h>
#include <mqtt_protocol.h>
