"""What the order form says, in the shop's words, for each outcome (the tests read them
here too)."""

__all__ = ["CARD_DECLINED", "CHANGED", "EXPIRED", "FORM", "NOT_CONFIRMED", "NOT_PLACED",
           "PAYMENT_NOT_CONFIRMED", "SESSION_LOST", "STILL_RUNNING", "UNAVAILABLE"]

#: The form's name, the endpoint it is sent to: its tokens are issued and spent for it alone.
FORM = "orders.create"
CHANGED = ("This form was already used for order {number}, with other details: nothing "
           "new was placed. Check the details below and submit to place another order.")
EXPIRED = "This form expired — please check your details and submit again."
NOT_PLACED = ("Your order was not placed and nothing was charged: we could not save it just "
              "now. Please check your details and submit again.")
SESSION_LOST = ("Your session expired, so we could not accept this form yet. Your details are "
                "still here — please check them and submit again.")
NOT_CONFIRMED = ("We could not confirm your order: our order system stopped answering while "
                 "placing it. Your details are kept — please submit again in a few moments: "
                 "if it was placed you will see it, and it will not be placed twice.")
STILL_RUNNING = ("We are still placing the order you sent first: it takes longer than usual. "
                 "Press Place order again in a few seconds to see it: it will not be placed "
                 "twice.")
UNAVAILABLE = ("We could not reach our order system just now, so nothing was placed. Your "
               "details are kept — please submit again in a few moments.")
CARD_DECLINED = ("Your card was declined, so nothing was charged and your order was not "
                 "placed. Your details are kept: enter the card again or use another one, "
                 "and press Place order.")
PAYMENT_NOT_CONFIRMED = ("Your order is saved, but we could not confirm your card payment "
                         "yet: the payment service did not answer in time. Press Place order "
                         "again in a few moments to finish it. Submitting again never charges "
                         "your card twice.")
