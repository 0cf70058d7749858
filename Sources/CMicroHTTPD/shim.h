// libmicrohttpd (Debian libmicrohttpd-dev), the HTTP server of the operator API and of the
// http_server source. Only Sources/HTTPServing/HTTPServer.swift talks to it.
#include <microhttpd.h>

// MHD_start_daemon is variadic, which Swift cannot call. The options that take one value go in
// an array (MHD_OPTION_ARRAY); the two callbacks that take a function and a closure each are
// passed here as arguments, so Swift never has to turn a C function pointer into an intptr_t
// (the form MHD_OPTION_ARRAY wants for two-pointer options).
static inline struct MHD_Daemon *locgate_mhd_start(unsigned int flags,
                                                   MHD_AcceptPolicyCallback accept, void *accept_cls,
                                                   MHD_AccessHandlerCallback handler, void *handler_cls,
                                                   MHD_NotifyConnectionCallback notify_connection,
                                                   MHD_RequestCompletedCallback notify_completed, void *notify_cls,
                                                   struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, 0, accept, accept_cls, handler, handler_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify_connection, notify_cls,
                            MHD_OPTION_NOTIFY_COMPLETED, notify_completed, notify_cls,
                            MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

// MHD_set_connection_option is variadic too: a long-lived response (Server-Sent Events) gets
// its own idle timeout.
static inline enum MHD_Result locgate_mhd_set_timeout(struct MHD_Connection *connection, unsigned int seconds) {
    return MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

// MHD_get_connection_info is variadic (a few kinds take arguments; the ones used here take none):
// the socket, the client's address and the socket context set when the connection started.
static inline const union MHD_ConnectionInfo *locgate_mhd_connection_info(struct MHD_Connection *connection,
                                                                          enum MHD_ConnectionInfoType kind) {
    return MHD_get_connection_info(connection, kind);
}
