// libmicrohttpd (Debian libmicrohttpd-dev), the operator API's HTTP server.
// Only Sources/OperatorAPI/HTTPServer.swift talks to it.
#include <microhttpd.h>

// MHD_start_daemon is variadic, which Swift cannot call: the options go in an array
// (MHD_OPTION_ARRAY) and this passes it on.
static inline struct MHD_Daemon *locgate_mhd_start(unsigned int flags, MHD_AccessHandlerCallback handler,
                                                   void *handler_cls, struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls, MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

// MHD_set_connection_option is variadic too: a long-lived response (Server-Sent Events) gets
// its own idle timeout.
static inline enum MHD_Result locgate_mhd_set_timeout(struct MHD_Connection *connection, unsigned int seconds) {
    return MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

// MHD_get_connection_info is variadic: the socket of a connection, to notice that the client of
// a long-lived response hung up while nothing was being sent; -1 when unknown.
static inline int locgate_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}
